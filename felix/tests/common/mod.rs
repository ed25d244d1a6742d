//! Helpers shared by felix's kernel tests.

/// Run `f` on a thread in a new, unnamed network namespace (gone when
/// the thread ends; `nft` children and netlink sockets opened there
/// belong to it).
pub fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare (root?)");
        f()
    })
    .join()
    .unwrap()
}
