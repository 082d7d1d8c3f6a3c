// mimalloc, not glibc's malloc: where threads allocate and free at once
// (`kb index`: the graph's reader beside the index's writers) glibc's
// arenas about doubled the graph's cost (docs/benchmarks.md). Built
// without transparent huge pages, which doubled peak memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_arena_reserve` in mimalloc.h (v3, as Cargo.lock pins it).
const MI_OPTION_ARENA_RESERVE: std::ffi::c_int = 23;

/// mimalloc takes address space an arena at a time, 1 GiB by default: under
/// a limit on address space (`ulimit -v`) that left too little for the
/// index's mapped files. 64 MiB, as glibc's heaps per thread; set before
/// the first allocation, since the first arena is taken with it.
extern "C" fn small_arenas() {
    // SAFETY: sets one of mimalloc's options; callable at any time.
    unsafe { mi_option_set(MI_OPTION_ARENA_RESERVE, 64 * 1024) }
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static SMALL_ARENAS: extern "C" fn() = small_arenas;

fn main() {
    // Where no constructor ran first (not Linux), from here on.
    small_arenas();
    std::process::exit(marktoflow::cli::main());
}
