//! Nothing renews the plugin's token: once it expires the plugin's ADD
//! fails with the API server's 401 and leaves no record (it does not fail
//! open); the same kubeconfig with a fresh token wires the pod.

use std::time::{Duration, SystemTime};

use tartan_apiserver::{kubeconfig, service_account_user};
use tartan_tests::standin::wait_until;

use crate::scene::{cni_kubeconfig, cni_log, endpoints_of, pod, runtime, seed, standin, unable};

#[test]
fn an_expired_token_fails_the_plugin() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    if let Some(why) = unable() {
        eprintln!("skipped: {why}");
        return;
    }
    let api = standin("ctx", Duration::from_secs(2));
    seed(&api);
    let cni = service_account_user("tartan-system", "tartan-cni");
    let tokens = &api.running.server.tokens;
    let old = tokens.issue(&cni, "cni");
    let path = cni_kubeconfig(&api);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, kubeconfig(&api.running.url, &cni, &old)).unwrap();
    wait_until("the token expires", Duration::from_secs(30), || {
        tokens.authenticate(&old, SystemTime::now()).is_err()
    })
    .unwrap();

    let (rt, _files) = runtime(&api, &path);
    let (_ns, call) = pod(&api, "late");
    let err = rt
        .add(&call)
        .expect_err("ADD with an expired token must fail");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("401") || msg.contains("Unauthorized"),
        "the failure names the API server's answer: {msg}\n{}",
        cni_log(&api)
    );
    assert_eq!(endpoints_of(&api, "late"), 0, "no record of the pod");
    assert!(
        api.requests().iter().any(|r| r.user.is_none()),
        "the plugin did ask, and was refused"
    );

    // The same file with a token that lives: the pod is wired.
    let fresh = tokens.issue_with(&cni, "cni", None, None, true);
    std::fs::write(&path, kubeconfig(&api.running.url, &cni, &fresh)).unwrap();
    rt.add(&call)
        .unwrap_or_else(|e| panic!("ADD with a valid token: {e:#}\n{}", cni_log(&api)));
    assert_eq!(endpoints_of(&api, "late"), 1);
    rt.del(&call, None)
        .unwrap_or_else(|e| panic!("DEL: {e:#}\n{}", cni_log(&api)));
}
