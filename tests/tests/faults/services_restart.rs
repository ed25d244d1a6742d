//! felix restarted during traffic through a Service (acceptance 7 of
//! issue 7): a TCP stream from a pod on node-1 to a pod on node-2 via the
//! ClusterIP echoes a block every 10 ms while felix on node-1 (where the
//! connection is translated) is restarted, then killed with SIGKILL and
//! started, and felix on node-2 restarted. Not one echo may fail, and new
//! connections to the Service work afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tartan_lab::cluster::svcprobe::{Proto, Stream, ask_many};
use tartan_tests::services::*;

#[test]
fn felix_restarts_keep_service_connections() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t0 = Instant::now();
    let lab = up("sr", 2);
    let _server = server_pod(&lab, "srv", "node-2", "app=srv");
    let cl = client_pod(&lab, "default/cl", "node-1");
    apply_ok(
        &lab,
        &service_yaml(
            "srv",
            "{selector: {app: srv}, ports: [{port: 80, targetPort: http}]}",
        ),
    );
    let vip = cluster_ip(&lab, "srv");
    wait_served(&lab, &cl, vip, 80, Proto::Tcp);

    let mut stream = Stream::open(&cl, vip, 80).unwrap();
    assert_eq!(stream.server, "srv");
    let stop = Arc::new(AtomicBool::new(false));
    let echoes = Arc::new(AtomicUsize::new(0));
    let pump = {
        let (stop, echoes) = (stop.clone(), echoes.clone());
        std::thread::spawn(move || -> Result<(), String> {
            let block = vec![b'x'; 4096];
            while !stop.load(Ordering::Relaxed) {
                stream.echo(&block).map_err(|e| {
                    format!("after {} echoes: {e:#}", echoes.load(Ordering::Relaxed))
                })?;
                echoes.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(())
        })
    };
    let step = |what: &[&str]| {
        std::thread::sleep(Duration::from_millis(1500));
        let before = echoes.load(Ordering::Relaxed);
        lab.ok(what);
        eprintln!("{what:?} at {:?} ({before} echoes so far)", t0.elapsed());
    };
    step(&["restart", "node-1", "felix"]);
    step(&["restart", "node-1", "felix", "--kill"]);
    step(&["restart", "node-2", "felix"]);
    step(&["restart", "node-2", "felix", "--kill"]);
    std::thread::sleep(Duration::from_millis(2000));
    stop.store(true, Ordering::Relaxed);
    let result = pump.join().expect("the pump thread");
    let n = echoes.load(Ordering::Relaxed);
    assert!(
        result.is_ok(),
        "the stream broke: {result:?}\n{}",
        dump(&lab)
    );
    assert!(n > 200, "only {n} echoes in 8 s");
    eprintln!("{n} echoes, none failed");

    // The restarted felixes run, serve new connections and follow a new
    // Service.
    let status: serde_json::Value =
        serde_json::from_str(&lab.ok(&["status", "-o", "json"])).unwrap();
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["felix"], true, "{status}");
    }
    let r = ask_many(
        std::slice::from_ref(&cl),
        10,
        vip,
        80,
        Proto::Tcp,
        Duration::from_secs(2),
    );
    assert_eq!(tally(&r[0]).get("srv"), Some(&10), "{:?}", tally(&r[0]));
    apply_ok(
        &lab,
        &service_yaml(
            "srv2",
            "{selector: {app: srv}, ports: [{port: 81, targetPort: 8080}]}",
        ),
    );
    wait_served(&lab, &cl, cluster_ip(&lab, "srv2"), 81, Proto::Tcp);
    let srv = pod_netns(&lab, "default/srv");
    wait_served(&lab, &srv, cluster_ip(&lab, "srv2"), 81, Proto::Tcp);
    eprintln!("done in {:?}", t0.elapsed());
}
