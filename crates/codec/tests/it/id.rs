//! Fresh ids differ.

use std::collections::HashSet;

#[test]
fn fresh_ids_differ_call_after_call() {
    let ids: HashSet<u64> = (0..10_000).map(|_| codec::fresh_id()).collect();
    assert_eq!(ids.len(), 10_000);
}
