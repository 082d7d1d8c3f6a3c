// mimalloc, not glibc's malloc: where threads allocate and free at once
// (`kb index`: the graph's reader beside the index's writers) glibc's
// arenas about doubled the graph's cost (docs/benchmarks.md). Built not to
// ask for transparent huge pages, which doubled peak memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe extern "C" {
    fn mi_option_set_default(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_arena_reserve` in mimalloc.h (v3, as Cargo.lock pins it;
/// `tests/cli.rs` checks it by the name mimalloc prints).
const MI_OPTION_ARENA_RESERVE: std::ffi::c_int = 23;

/// mimalloc takes address space an arena at a time, 1 GiB by default: under
/// a limit on address space (`ulimit -v`) that left too little for the
/// index's mapped files. 64 MiB (in KiB), as glibc's heaps per thread; a
/// default, so `MIMALLOC_ARENA_RESERVE` still wins.
extern "C" fn small_arenas() {
    // SAFETY: mimalloc's options are not thread-safe to set; this runs
    // before `main`, while the process has one thread.
    unsafe { mi_option_set_default(MI_OPTION_ARENA_RESERVE, 64 * 1024) }
}

// Before the first allocation, which takes the first arena: the
// executable's constructors run before Rust's runtime allocates. (Where
// there are none, not Linux, arenas keep mimalloc's size.)
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static SMALL_ARENAS: extern "C" fn() = small_arenas;

fn main() {
    std::process::exit(marktoflow::cli::main());
}
