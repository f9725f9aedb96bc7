//! The cluster harness's payment gateway as a process: `gateway_server --file PATH --addr
//! ADDR [--seed N]`. Prints `listening on ADDR` once it serves, then serves until killed.
//! See `idem_crash::gateway_http` for the wire.

use std::path::PathBuf;

fn value(args: &[String], name: &str) -> Option<String> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(file), Some(addr)) = (value(&args, "--file"), value(&args, "--addr")) else {
        eprintln!("usage: gateway_server --file PATH --addr HOST:PORT [--seed N]");
        std::process::exit(2);
    };
    let seed = match value(&args, "--seed").map(|s| s.parse::<u64>()) {
        None => 1,
        Some(Ok(seed)) => seed,
        Some(Err(_)) => {
            eprintln!("gateway_server: --seed takes a number");
            std::process::exit(2);
        }
    };
    match idem_crash::GatewayServer::start(&PathBuf::from(&file), &addr, seed) {
        Ok(server) => println!("listening on {}", server.addr()),
        Err(error) => {
            eprintln!("gateway_server: {file} on {addr}: {error}");
            std::process::exit(1);
        }
    }
    loop {
        std::thread::park();
    }
}
