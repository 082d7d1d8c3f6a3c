fn main() {
    std::process::exit(marktoflow::cli::main());
}
