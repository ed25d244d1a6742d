//! The built binaries answer VERSION and report bad calls in the spec's
//! JSON, without root or a datastore. (Their being integration tests also
//! makes `cargo test --workspace` build them for the lab's tests.)

use std::io::Write;
use std::process::{Command, Stdio};

fn call(bin: &str, env: &[(&str, &str)], stdin: &str) -> (bool, serde_json::Value) {
    let mut c = Command::new(bin);
    for k in [
        "CNI_COMMAND",
        "CNI_CONTAINERID",
        "CNI_NETNS",
        "CNI_IFNAME",
        "CNI_PATH",
        "CNI_ARGS",
    ] {
        c.env_remove(k);
    }
    let mut child = c
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.success(), v)
}

#[test]
fn both_binaries_speak_version_and_errors() {
    for bin in [
        env!("CARGO_BIN_EXE_tartan"),
        env!("CARGO_BIN_EXE_tartan-ipam"),
    ] {
        let (ok, v) = call(
            bin,
            &[("CNI_COMMAND", "VERSION")],
            r#"{"cniVersion":"1.0.0"}"#,
        );
        assert!(ok, "{bin}: {v}");
        // The spec: "the value of cniVersion specified on input".
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(
            v["supportedVersions"],
            serde_json::json!(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
        );
        for (stdin, echoed) in [
            (r#"{"cniVersion":"0.4.0"}"#, "0.4.0"),
            // Not one we speak: still echoed; the runtime compares.
            (r#"{"cniVersion":"2.0.0"}"#, "2.0.0"),
            // None, or not a version: the newest we speak.
            ("{}", "1.1.0"),
            (r#"{"cniVersion":"x\ny"}"#, "1.1.0"),
        ] {
            let (ok, v) = call(bin, &[("CNI_COMMAND", "VERSION")], stdin);
            assert!(ok, "{bin} {stdin}: {v}");
            assert_eq!(v["cniVersion"], echoed, "{bin} {stdin}");
        }
        let (ok, v) = call(bin, &[], "{}");
        assert!(!ok);
        assert_eq!(v["code"], 4, "{bin}: {v}");
        let (ok, v) = call(bin, &[("CNI_COMMAND", "STATUS")], "not json");
        assert!(!ok);
        assert_eq!(v["code"], 6, "{bin}: {v}");
    }
}

#[test]
fn a_variable_that_is_not_utf8_is_no_panic() {
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"\xfe\xff");
    for bin in [
        env!("CARGO_BIN_EXE_tartan"),
        env!("CARGO_BIN_EXE_tartan-ipam"),
    ] {
        // Another program's variable: ignored.
        let out = Command::new(bin)
            .env("CNI_COMMAND", "VERSION")
            .env("SOMETHING_ELSE", odd)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{bin}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["cniVersion"], "1.1.0");
        // A CNI variable that is not text: refused in the spec's JSON.
        let out = Command::new(bin)
            .env("CNI_COMMAND", "DEL")
            .env("CNI_CONTAINERID", odd)
            .env("CNI_IFNAME", "eth0")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bin}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["code"], 4, "{bin}: {v}");
    }
}
