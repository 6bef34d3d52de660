//! Work over a list split between this thread and one helper thread, its results kept in
//! the list's order: the stat cache's stats and the snapshot's hashes take it.

/// `work` over `items`, the second half on a helper thread named `name` once there are
/// `min` items or more (this thread does the first half meanwhile); the results in the
/// order of `items`. A helper that cannot start, or dies, leaves its half to this thread.
pub(crate) fn in_halves<T: Sync, R: Send>(
    items: &[T],
    min: usize,
    name: &str,
    work: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    if items.len() < min {
        return work(items);
    }
    let (first, second) = items.split_at(items.len() / 2);
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn_scoped(scope, || work(second));
        let mut out = work(first);
        match helper.map(std::thread::ScopedJoinHandle::join) {
            Ok(Ok(rest)) => out.extend(rest),
            _ => out.extend(work(second)),
        }
        out
    })
}

#[cfg(test)]
mod tests {
    /// Short lists stay on this thread, long ones are split; either way every item is
    /// worked on once and the results keep the list's order.
    #[test]
    fn results_keep_the_order_of_the_list() {
        for len in [0, 1, 7, 8, 9, 301] {
            let items: Vec<usize> = (0..len).collect();
            let doubled = super::in_halves(&items, 8, "test-halves", |part| {
                part.iter().map(|i| i * 2).collect()
            });
            assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
    }
}
