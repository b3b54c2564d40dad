//! Entry point: hands argv to the command-line layer and exits with its code.
fn main() {
    std::process::exit(shell_operator::cli::main());
}
