//! `tartan-lab`: Tartan on one machine, in network namespaces (run as root).
//! `tartan-lab bgp-demo` peers tartan-bgpd with BIRD across a veth, shows
//! the session, the kernel routes on both sides and a ping between the
//! announced prefixes, and removes everything it made.

mod cli;
mod signals;

use anyhow::{Context, Result, bail};
use clap::Parser;
use cli::*;
use signals::*;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tartan_lab::Pair;
use tartan_lab::netns::{Netns, wait_for};
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route, Tartan, TartanOptions, bgpd_binary};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("tartan-lab: run as root (it creates network namespaces)");
        return std::process::ExitCode::FAILURE;
    }
    if std::env::var_os("TARTAN_LOG").is_none() {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("TARTAN_LOG", "info") };
    }
    // Errors return through the guards, which remove what was made.
    match run(cli) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("tartan-lab: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<u8> {
    use tartan_lab::cluster::{LabState, down, pod, status, up};
    let name = cli.name;
    let mut say = |line: &str| println!("==> {line}");
    match cli.cmd {
        Cmd::BgpDemo(args) => bgp_demo(&args).map(|()| 0),
        Cmd::Up(a) => {
            let ipip_mode = match &a.ipip_mode {
                Some(m) => up::parse_mode("--ipip-mode", m)?,
                None => Default::default(),
            };
            let vxlan_mode = match &a.vxlan_mode {
                Some(m) => up::parse_mode("--vxlan-mode", m)?,
                // IPIP asked for: no VXLAN unless asked too.
                None if a.ipip_mode.is_some() => Default::default(),
                None => up::default_vxlan_mode(&a.topology),
            };
            up::up(
                &up::UpOptions {
                    name,
                    nodes: a.nodes,
                    topology: a.topology,
                    vxlan_mode,
                    ipip_mode,
                    dual_stack: a.dual_stack,
                    service_cidr: a.service_cidr,
                    service_cidr6: a.service_cidr6,
                    lb_cidr: a.lb_cidr,
                    datastore: a.datastore.parse()?,
                },
                &mut say,
            )?;
            Ok(0)
        }
        Cmd::Down => down::down(&name, &mut say).map(|()| 0),
        Cmd::Restart { node, daemon, kill } => {
            up::restart(&name, &node, up::Daemon::parse(&daemon)?, kill)?;
            say(&format!("{node}: {daemon} restarted"));
            Ok(0)
        }
        Cmd::Pod(PodCmd::Add {
            pod: p,
            node,
            labels,
            ports,
            hostname,
            subdomain,
        }) => {
            let names = pod::PodNames {
                hostname,
                subdomain,
            };
            let rec = pod::add_named(&name, &p, &node, &labels, &ports, &names)?;
            println!(
                "pod {}/{} on {}: {}",
                rec.namespace,
                rec.name,
                rec.node,
                rec.address().unwrap_or_default()
            );
            Ok(0)
        }
        Cmd::Pod(PodCmd::Del { pod: p }) => pod::del(&name, &p).map(|()| 0),
        Cmd::Pod(PodCmd::Ready { pod: p, ready }) => pod::set_ready(&name, &p, ready).map(|()| 0),
        Cmd::Pod(PodCmd::Terminate { pod: p }) => pod::terminate(&name, &p).map(|()| 0),
        Cmd::Pod(PodCmd::Ip { pod: p, ipv6 }) => {
            let (ns, n) = pod::parse_ref(&p)?;
            let rec = pod::load(&name, &ns, &n)?;
            let a = if ipv6 { rec.address6() } else { rec.address() };
            match a {
                Some(a) => {
                    println!("{a}");
                    Ok(0)
                }
                None => {
                    eprintln!(
                        "tartan-lab: pod {p} has no {} address",
                        if ipv6 { "IPv6" } else { "IPv4" }
                    );
                    Ok(1)
                }
            }
        }
        Cmd::Exec { pod: p, cmd } => {
            let code = pod::exec(&name, &p, &cmd)?;
            Ok(u8::try_from(code).unwrap_or(1))
        }
        Cmd::Status { output } => {
            let st = LabState::load(&name)?;
            let v = status::status(&st);
            if output.as_deref() == Some("json") {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", status::render(&v));
            }
            Ok(0)
        }
        Cmd::Ctl { args } => {
            let st = LabState::load(&name)?;
            let ctl = sibling("tartanctl").unwrap_or_else(|| PathBuf::from("tartanctl"));
            tartan_lab::cluster::services::ctl(&st, &ctl, &args)
        }
    }
}

/// A program beside this executable (target/release/…), if present.
fn sibling(name: &str) -> Option<PathBuf> {
    let p = std::env::current_exe().ok()?.parent()?.join(name);
    p.exists().then_some(p)
}

fn section(title: &str) {
    println!("\n=== {title}");
}

fn show(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("run {cmd:?}"))?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("{cmd:?}: {}", out.status);
    }
    Ok(())
}

fn ip_route(ns: &Netns) -> Result<()> {
    println!("$ ip -n {} route", ns.name());
    show(Command::new("ip").args(["-n", ns.name(), "route"]))
}

const BIRD_AS: u32 = 65002;
const TARTAN_AS: u32 = 65001;
const BIRD_NET: &str = "10.202.0.0/24";
const TARTAN_NET: &str = "10.201.0.0/24";
const BIRD_HOST: &str = "10.202.0.1";
const TARTAN_HOST: &str = "10.201.0.1";

fn bgp_demo(args: &DemoArgs) -> Result<()> {
    catch_signals()?;
    let bgpd = args.bgpd.clone().unwrap_or_else(bgpd_binary);
    if !bgpd.exists() {
        bail!(
            "{} not found: build it (cargo build --release) or pass --bgpd",
            bgpd.display()
        );
    }
    let ctl = args.tartanctl.clone().or_else(|| sibling("tartanctl"));

    section("namespaces");
    let p = Pair::new("tdemo")?;
    println!(
        "{} (BIRD, AS {BIRD_AS}): {} on {}, {BIRD_HOST}/32 on lo",
        p.a.name(),
        p.a_v4(),
        p.a_if()
    );
    println!(
        "{} (tartan-bgpd, AS {TARTAN_AS}): {} on {}, {TARTAN_HOST}/32 on lo",
        p.b.name(),
        p.b_v4(),
        p.b_if()
    );
    // An address inside each announced prefix, to ping between them.
    p.a.ip(&["addr", "add", &format!("{BIRD_HOST}/32"), "dev", "lo"])?;
    p.b.ip(&["addr", "add", &format!("{TARTAN_HOST}/32"), "dev", "lo"])?;
    stopped()?;

    section("daemons");
    let bird = Bird::start(
        &p.a,
        BgpConfig::new(p.a_v4(), BIRD_AS)
            .route(Route::new(BIRD_NET))
            .neighbor(Neighbor::new(p.b_v4().into(), TARTAN_AS)),
    )?;
    println!("bird: pid {}, announces {BIRD_NET}", bird.daemon().pid());
    let tartan = Tartan::start(
        &p.b,
        &bgpd,
        &BgpConfig::new(Ipv4Addr::new(192, 0, 2, 1), TARTAN_AS)
            .route(Route::new(TARTAN_NET))
            .neighbor(Neighbor::new(p.a_v4().into(), BIRD_AS)),
        &TartanOptions::default(),
    )?;
    println!(
        "tartan-bgpd: pid {}, announces {TARTAN_NET}, config {}, control socket {}",
        tartan.daemon().pid(),
        tartan.config_path().display(),
        tartan.socket().display()
    );

    let t = Duration::from_secs(30);
    tartan.wait_established(p.a_v4().into(), t)?;
    stopped()?;
    bird.wait_established(t)?;
    wait_for("BIRD's route in tartan's namespace", t, || {
        route_with(&p.b, BIRD_NET).then_some(())
    })?;
    wait_for("tartan's route in BIRD's namespace", t, || {
        route_with(&p.a, TARTAN_NET).then_some(())
    })?;
    stopped()?;

    section("the session, as tartanctl sees it");
    match &ctl {
        Some(ctl) => {
            println!(
                "$ tartanctl --bgp-socket {} bgp peers",
                tartan.socket().display()
            );
            show(tartanctl(ctl, tartan.socket()).args(["bgp", "peers"]))?;
            println!(
                "$ tartanctl --bgp-socket {} bgp routes",
                tartan.socket().display()
            );
            show(tartanctl(ctl, tartan.socket()).args(["bgp", "routes"]))?;
        }
        None => {
            println!("(tartanctl not found beside tartan-lab; from the control API)");
            for peer in tartan.peers()? {
                println!(
                    "{} AS {} {:?} uptime {:?}s prefixes received {}",
                    peer.address, peer.asn, peer.state, peer.uptime_seconds, peer.prefixes.received
                );
            }
        }
    }
    section("the session, as BIRD sees it");
    println!("{}", bird.birdc(&["show", "protocols"])?);

    section(
        "kernel routes (tartan-bgpd installs with protocol 201 \"tartan\"; BIRD with \"bird\")",
    );
    ip_route(&p.b)?;
    ip_route(&p.a)?;

    section(&format!(
        "ping {BIRD_HOST} from {TARTAN_HOST}, across both learned routes"
    ));
    println!(
        "$ ip netns exec {} ping -c 3 -I {TARTAN_HOST} {BIRD_HOST}",
        p.b.name()
    );
    show(p.b.command("ping").args([
        "-n",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "1",
        "-I",
        TARTAN_HOST,
        BIRD_HOST,
    ]))?;

    if args.keep {
        section("kept running; press Ctrl-C to tear down");
        println!("try:");
        if let Some(ctl) = &ctl {
            println!(
                "  {} --bgp-socket {} bgp peers",
                ctl.display(),
                tartan.socket().display()
            );
        }
        println!("  ip netns exec {} ping {BIRD_HOST}", p.b.name());
        println!("  ip -n {} route", p.a.name());
        while !STOP.load(Ordering::SeqCst) {
            if !tartan.daemon().is_running() || !bird.daemon().is_running() {
                bail!("a daemon exited:\n{}", tartan.daemon().log_tail(20));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    section("tearing down");
    // Daemons first, then the namespaces (and the veth with them).
    drop(tartan);
    drop(bird);
    let names = [p.a.name().to_string(), p.b.name().to_string()];
    drop(p);
    let left = Command::new("ip").args(["netns", "list"]).output()?;
    let left = String::from_utf8_lossy(&left.stdout);
    if names
        .iter()
        .any(|n| left.lines().any(|l| l.split_whitespace().next() == Some(n)))
    {
        bail!("namespaces left behind: {left}");
    }
    println!("removed {} and {}", names[0], names[1]);
    Ok(())
}

fn tartanctl(ctl: &Path, socket: &Path) -> Command {
    let mut c = Command::new(ctl);
    c.arg("--bgp-socket").arg(socket);
    c
}

fn route_with(ns: &Netns, dst: &str) -> bool {
    tartan_lab::kernel_routes(ns, tartan_lab::Family::V4, None)
        .map(|r| r.iter().any(|r| r.dst == dst))
        .unwrap_or(false)
}
