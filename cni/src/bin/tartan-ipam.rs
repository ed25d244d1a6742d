//! `tartan-ipam`: Tartan's block IPAM as a CNI IPAM plugin.

fn main() {
    std::process::exit(tartan_cni::plugin::main_with(
        tartan_cni::plugin::Mode::Ipam,
    ));
}
