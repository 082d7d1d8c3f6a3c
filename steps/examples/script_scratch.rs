use marktoflow_steps::action::{Cancel, LogLine};
use marktoflow_steps::sandbox::Sandbox;
use marktoflow_steps::script::*;
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(WORKER_ARG) {
        std::process::exit(worker_main());
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let limits = ScriptLimits { memory_bytes: Some(1 << 30), ..Default::default() };
    let host = ScriptHost::with_limits(std::env::current_exe().unwrap(), limits);
    for code in args[1..].iter() {
        let t = Instant::now();
        let job = ScriptJob { code: code.clone(), context: serde_json::json!({}), sandbox: Sandbox::closed("/tmp".into()), timeout: None };
        let r = rt.block_on(host.run(job, &|l: LogLine| println!("  log {:?} {}", l.level, l.message), &Cancel::default()));
        println!("{:?} -> {:?} ({:?})", code, r.map_err(|e| e.to_string()), t.elapsed());
    }
}
