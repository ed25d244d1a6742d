//! `tartan-bench-heap [SERVICES [ENDPOINTS]]`: felix's service proxy
//! under a counting allocator, stage by stage
//! ([`tartan_bench::servicebench::heap`]); prints a Markdown table.

use tartan_bench::heapcount::Counting;
use tartan_bench::servicebench::heap;

#[global_allocator]
static ALLOC: Counting = Counting;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().transpose()?.unwrap_or(10_000);
    let per = args.next().transpose()?.unwrap_or(10);
    let stages = heap::profile(n, per)?;
    print!("{}", heap::markdown(n, per, &stages));
    Ok(())
}
