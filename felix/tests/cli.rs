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

/// The CNI plugins' kubeconfig is kept with a TokenRequest: refused on
/// etcd, and a lifetime under the API server's minimum (600 s) refused,
/// before anything starts.
#[test]
fn cni_token_flags_are_checked_before_starting() {
    // A felix that took the flags would start and wait for its datastore:
    // it gets 10 s to refuse, then is killed and the test fails.
    let run = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tartan-felix"))
            .env_remove("TARTAN_FELIX_CNI_KUBECONFIG")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?}: felix started instead of refusing");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = run(&[
        "--datastore",
        "etcd://127.0.0.1:1",
        "--cni-kubeconfig",
        "/nonexistent/kubeconfig",
    ]);
    assert!(
        err.contains("--cni-kubeconfig needs --datastore kubernetes"),
        "{err}"
    );
    let err = run(&[
        "--datastore",
        "kubernetes",
        "--cni-kubeconfig",
        "/nonexistent/kubeconfig",
        "--cni-token-seconds",
        "60",
    ]);
    assert!(err.contains("--cni-token-seconds"), "{err}");
    // A conflist left pending for a kubeconfig nobody writes would never
    // be installed: refused.
    let err = run(&[
        "--datastore",
        "kubernetes",
        "--cni-conflist",
        "/nonexistent/10-tartan.conflist",
    ]);
    assert!(
        err.contains("--cni-conflist needs --cni-kubeconfig"),
        "{err}"
    );
}
