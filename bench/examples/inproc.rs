//! Times the in-process evaluation of one filter over a generated input (the benchmark's
//! floor), for experiments with allocator settings such as
//! `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`: `inproc BYTES FILTER ITERS`.
mod shared;

use std::time::Instant;
fn main() {
    let mut args = std::env::args().skip(1);
    let bytes: usize = args.next().unwrap().parse().unwrap();
    let filter = args.next().unwrap();
    let iters: usize = args.next().unwrap().parse().unwrap();
    let input = jqjail_worker::Bytes::from(jqjail_bench_corpus(bytes));
    let engine = jqjail_worker::Engine::new();
    let job = shared::job(filter, input.len());
    let mut t = Vec::new();
    for _ in 0..iters {
        // A worker's natives are built before its request (`Engine::prepare`).
        engine.prepare();
        let s = Instant::now();
        let _ = jqjail_worker::evaluate(&engine, &job, &input);
        t.push(s.elapsed().as_secs_f64() * 1000.0);
    }
    t.sort_by(f64::total_cmp);
    println!("median {:.4} ms (min {:.4})", t[t.len() / 2], t[0]);
}
fn jqjail_bench_corpus(bytes: usize) -> Vec<u8> {
    let mut out = String::from("[");
    let mut i = 0;
    while out.len() < bytes {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            r#"{{"id":{i},"title":"issue {i}","labels":[{{"name":"bug"}}],"body":"{}"}}"#,
            "lorem ipsum ".repeat(10)
        ));
        i += 1;
    }
    out.push(']');
    out.into_bytes()
}
