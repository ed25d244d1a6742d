//! The built `tartan-felix` refuses to start without a datastore, and says
//! why. (Being an integration test also makes `cargo test --workspace`
//! build the binary for the lab's tests.)

use std::process::Command;

#[test]
fn refuses_to_start_without_a_datastore() {
    let out = Command::new(env!("CARGO_BIN_EXE_tartan-felix"))
        .env_remove("TARTAN_DATASTORE")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--datastore"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_tartan-felix"))
        .args(["--datastore", "nonsense://x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown kind of datastore"), "{err}");
}
