// mimalloc, not glibc's malloc: where threads allocate and free at once
// (`kb index`: the graph's reader beside the index's writers) glibc's
// arenas about doubled the graph's cost (docs/benchmarks.md). Built
// without transparent huge pages, which doubled peak memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(marktoflow::cli::main());
}
