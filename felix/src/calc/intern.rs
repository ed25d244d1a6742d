//! Interning: one shared copy of each distinct value (a label set, a
//! namespace's name), so that 150,000 endpoints of 5,000 workloads hold
//! 5,000 label sets rather than 150,000. Pure.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

/// The distinct values in use. A value no one holds any more is forgotten
/// at the next sweep; copies handed back through [`Interner::release`]
/// bring the sweep on once they number half the values held, so the
/// unused values are never more than the used ones and sweeping costs
/// O(1) per release.
#[derive(Debug)]
pub struct Interner<T: ?Sized + Eq + Hash> {
    held: HashSet<Arc<T>>,
    released: usize,
}

impl<T: ?Sized + Eq + Hash> Clone for Interner<T> {
    fn clone(&self) -> Self {
        Interner {
            held: self.held.clone(),
            released: self.released,
        }
    }
}

impl<T: ?Sized + Eq + Hash> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            held: HashSet::new(),
            released: 0,
        }
    }
}

impl<T: ?Sized + Eq + Hash> Interner<T> {
    /// The shared copy of `v`, made when `v` is new.
    pub fn intern<Q>(&mut self, v: Q) -> Arc<T>
    where
        Q: Borrow<T>,
        Arc<T>: From<Q>,
    {
        if let Some(a) = self.held.get(v.borrow()) {
            return a.clone();
        }
        let a: Arc<T> = Arc::from(v);
        self.held.insert(a.clone());
        a
    }

    /// The shared copy of `v`, if there is one.
    pub fn get(&self, v: &T) -> Option<Arc<T>> {
        self.held.get(v).cloned()
    }

    /// Give `a` back (drop it, and sweep when due).
    pub fn release(&mut self, a: Arc<T>) {
        self.release_with(a, drop);
    }

    /// [`Interner::release`] for values that hold interned values
    /// themselves: each value a sweep forgets is handed to `gone` (which
    /// gives its parts back to their interners).
    pub fn release_with(&mut self, a: Arc<T>, gone: impl FnMut(Arc<T>)) {
        drop(a);
        self.released += 1;
        // Unused values are at most those released since the last sweep.
        if 2 * self.released > self.held.len() {
            self.sweep_with(gone);
        }
    }

    /// Forget the values only the interner holds.
    pub fn sweep(&mut self) {
        self.sweep_with(drop);
    }

    fn sweep_with(&mut self, mut gone: impl FnMut(Arc<T>)) {
        let mut unused = Vec::new();
        self.held.retain(|a| {
            let used = Arc::strong_count(a) > 1;
            if !used {
                unused.push(a.clone());
            }
            used
        });
        self.released = 0;
        unused.into_iter().for_each(&mut gone);
    }

    /// How many distinct values are held by someone.
    pub fn len(&self) -> usize {
        self.held
            .iter()
            .filter(|a| Arc::strong_count(a) > 1)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Labels = BTreeMap<String, String>;

    fn labels(v: &str) -> Labels {
        [("app".to_string(), v.to_string())].into()
    }

    #[test]
    fn equal_values_share_one_copy_and_are_forgotten_once_unused() {
        let mut i: Interner<Labels> = Interner::default();
        let a = i.intern(labels("a"));
        let b = i.intern(labels("a"));
        let c = i.intern(labels("c"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(i.len(), 2);
        i.release(a);
        assert_eq!(i.len(), 2, "b still holds it");
        i.release(b);
        assert_eq!(i.len(), 1);
        drop(c);
        assert!(i.is_empty());
        i.sweep();
        assert!(i.held.is_empty());
        let mut s: Interner<str> = Interner::default();
        let x = s.intern("ns");
        assert!(Arc::ptr_eq(&x, &s.intern(String::from("ns"))));
    }

    #[test]
    fn releases_sweep_so_unused_values_stay_fewer_than_used_ones() {
        let mut i: Interner<Labels> = Interner::default();
        let kept: Vec<_> = (0..10).map(|n| i.intern(labels(&n.to_string()))).collect();
        for n in 10..1000 {
            let a = i.intern(labels(&n.to_string()));
            i.release(a);
            assert!(i.held.len() <= 2 * kept.len() + 2, "{}", i.held.len());
        }
        assert_eq!(i.len(), 10);
    }
}
