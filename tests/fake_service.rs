//! A fake web service on 127.0.0.1 for the integration tests: it records
//! each request whole (method, path with its query, headers, body) and
//! answers with what the test's handler gives (status, headers, body), so
//! a test can play a paid service's API as its documentation describes it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

#[derive(Debug, Clone)]
pub struct Hit {
    pub method: String,
    /// The path with its query (`/conversations.history?channel=C1`).
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What the service answers: status, headers, body.
pub type Answer = (u16, Vec<(&'static str, String)>, String);
pub type Handler = Arc<dyn Fn(&Hit, usize) -> Answer + Send + Sync>;

pub struct FakeService {
    pub base: String,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl FakeService {
    /// Starts a service answering each request with `handler(request, n)`,
    /// `n` counting the requests before it.
    pub fn start(handler: Handler) -> FakeService {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let rec = hits.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (rec, handler) = (rec.clone(), handler.clone());
                thread::spawn(move || {
                    let _ = serve(stream, &rec, &handler);
                });
            }
        });
        FakeService { base, hits }
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

fn serve(mut stream: TcpStream, rec: &Mutex<Vec<Hit>>, handler: &Handler) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("GET").to_string();
        let path = parts.next().unwrap_or("/").to_string();
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        let hit = Hit {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        let n = {
            let mut all = rec.lock().unwrap();
            all.push(hit.clone());
            all.len() - 1
        };
        let (status, extra, text) = handler(&hit, n);
        let mut head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            if status < 400 { "OK" } else { "Error" },
            text.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(text.as_bytes())?;
        stream.flush()?;
    }
}
