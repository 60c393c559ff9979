fn main() -> std::process::ExitCode {
    herald_server::cli::run()
}
