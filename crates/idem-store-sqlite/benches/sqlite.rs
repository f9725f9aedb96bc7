//! The durable store beside the memory store, in one run: claim+complete on fresh keys and
//! replays, 1 and 2 threads (`sqlite` vs `idem` = MemoryStore; the ratio shows what
//! durability costs). Also prints the bytes on disk per record, and the disk's floor beside
//! the store's group commit: synced writes per second on the same disk, and claim+complete
//! per second at 1, 16 and 64 threads with the groups that carried them.
//! `cargo bench -p idem-store-sqlite --bench sqlite`

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idem_core::{Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
use idem_store_sqlite::SqliteStore;
use idem_testkit::bench;

static NEXT: AtomicU64 = AtomicU64::new(0);

fn file() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idem-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(format!("store-{}.sqlite", NEXT.fetch_add(1, Ordering::Relaxed)))
}

fn key(i: u64) -> ScopedKey {
    ScopedKey::parse("bench", &format!("key-{i}")).expect("valid key")
}

fn cycle<S: KeyStore<u64>>(store: &S, i: u64, fp: &Fingerprint) {
    match store.claim(&key(i), fp).expect("claim") {
        Claim::Acquired(lease) => store.complete(&lease, i).expect("complete"),
        Claim::Replay(v) => {
            black_box(v);
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn timed<S: KeyStore<u64> + Sync>(
    store: &S,
    threads: u64,
    iters: u64,
    base: u64,
    replay: bool,
) -> Duration {
    let fp = Fingerprint::builder("bench").finish();
    let per_thread = iters.div_ceil(threads);
    bench::timed(0..threads, |t| {
        for i in 0..per_thread {
            let k = if replay { i % 64 } else { base + t * per_thread + i };
            cycle(store, k, &fp);
        }
    })
}

fn bench(c: &mut Criterion) {
    let config = StoreConfig::builder().capacity(1 << 22).build().expect("valid config");
    for (name, replay) in [("durable_claim_complete", false), ("durable_replay", true)] {
        let mut group = c.benchmark_group(name);
        for threads in [1u64, 2, 16, 64] {
            let param = format!("{threads} threads");
            let sqlite = SqliteStore::<u64>::open(&file(), config).expect("open");
            let warm = MemoryStore::<u64>::new(config);
            let fp = Fingerprint::builder("bench").finish();
            for i in 0..64 {
                cycle(&sqlite, i, &fp);
                cycle(&warm, i, &fp);
            }
            let base = AtomicU64::new(1_000);
            group.bench_function(BenchmarkId::new("sqlite", &param), |b| {
                b.iter_custom(|iters| {
                    timed(
                        &sqlite,
                        threads,
                        iters,
                        base.fetch_add(iters + threads, Ordering::Relaxed),
                        replay,
                    )
                })
            });
            group.bench_function(BenchmarkId::new("idem", &param), |b| {
                b.iter_custom(|iters| {
                    // A fresh memory store per sample: millions of fresh keys per sample.
                    let big = StoreConfig::builder()
                        .capacity(StoreConfig::CAPACITY_MAX)
                        .build()
                        .expect("valid config");
                    let fresh = (!replay).then(|| MemoryStore::<u64>::new(big));
                    let store = fresh.as_ref().unwrap_or(&warm);
                    let base = base.fetch_add(iters + threads, Ordering::Relaxed);
                    timed(store, threads, iters, base, replay)
                })
            });
        }
        group.finish();
    }
    bytes_per_record(config);
    fsync_floor(config);
}

/// Synced writes timed for the floor: enough that one slow sync is noise.
const SYNCED_WRITES: u32 = 300;
/// Claim+complete cycles per thread count in the floor's comparison.
const FLOOR_CYCLES: u64 = 3_000;

/// The disk's floor, fio-style, in the store's own directory: 4 KiB appended and
/// `fdatasync`ed, one at a time, as a group commit's one synced write is. Then the store's
/// claim+complete per second at 1, 16 and 64 threads, each cycle two writer requests (the
/// claim, the complete), with the groups it committed: at best one group per synced write.
fn fsync_floor(config: StoreConfig) {
    use std::io::Write;
    let path = file().with_extension("floor");
    let mut out = std::fs::File::create(&path).expect("a scratch file");
    let page = [0x5a_u8; 4096];
    let start = std::time::Instant::now();
    for _ in 0..SYNCED_WRITES {
        out.write_all(&page).expect("write");
        out.sync_data().expect("fdatasync");
    }
    let synced_per_s = f64::from(SYNCED_WRITES) / start.elapsed().as_secs_f64();
    println!("fsync floor: {synced_per_s:.0} synced 4 KiB writes per second");
    println!("threads | claim+complete/s | groups/s | requests per group | groups/s of floor");
    let fp = Fingerprint::builder("bench").finish();
    for threads in [1_u64, 16, 64] {
        let store = SqliteStore::<u64>::open(&file(), config).expect("open");
        cycle(&store, 0, &fp);
        let before = store.commit_stats();
        let elapsed = timed(&store, threads, FLOOR_CYCLES, 1, false).as_secs_f64();
        let after = store.commit_stats();
        let groups = (after.groups_committed - before.groups_committed) as f64;
        let requests = (after.requests_committed - before.requests_committed) as f64;
        let cycles = FLOOR_CYCLES.div_ceil(threads) * threads;
        println!(
            "{threads} | {:.0} | {:.0} | {:.1} | {:.2}",
            cycles as f64 / elapsed,
            groups / elapsed,
            requests / groups,
            groups / elapsed / synced_per_s,
        );
    }
}

/// Writes 20,000 finished records and reports the file size per record.
fn bytes_per_record(config: StoreConfig) {
    let path = file();
    let store = SqliteStore::<u64>::open(&path, config).expect("open");
    let fp = Fingerprint::builder("bench").finish();
    let n = 20_000;
    for i in 0..n {
        cycle(&store, 10_000_000 + i, &fp);
    }
    drop(store);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(path.with_extension("sqlite-wal")).map(|m| m.len()).unwrap_or(0);
    println!(
        "sqlite bytes on disk per record: {:.1} ({size} bytes for {n} records)",
        size as f64 / n as f64
    );
}

criterion_group! {
    name = sqlite;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(sqlite);
