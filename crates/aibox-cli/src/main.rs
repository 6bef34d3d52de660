//! The `aibox` binary: parse arguments, call one library function, render the result.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
