//! `tartan`: the CNI plugin. Reads the call from the environment and the
//! configuration from stdin, prints the result or error on stdout.

fn main() {
    std::process::exit(tartan_cni::plugin::main_with(
        tartan_cni::plugin::Mode::Plugin,
    ));
}
