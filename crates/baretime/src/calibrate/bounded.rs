//! A fixed-capacity list on the stack: what the fit keeps per bin, without an allocator and
//! without a dependency (the core crate has none).

use core::ops::{Deref, DerefMut};

/// Up to `N` values of `T`; a push past `N` is refused, never a panic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounded<T: Copy + Default, const N: usize> {
    items: [T; N],
    len: usize,
}

impl<T: Copy + Default, const N: usize> Bounded<T, N> {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Self::filled_with(T::default())
    }

    /// An empty list whose unused slots hold `fill` (for `const` construction).
    pub(crate) const fn filled_with(fill: T) -> Self {
        Bounded {
            items: [fill; N],
            len: 0,
        }
    }

    /// Appends `value`, or hands it back when the list is full.
    pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = value;
                // `len < N` here, so it cannot overflow.
                self.len = self.len.saturating_add(1);
                Ok(())
            }
            None => Err(value),
        }
    }

    /// Whether another push would be refused.
    pub(crate) fn is_full(&self) -> bool {
        self.len >= N
    }

    /// The values pushed so far.
    pub(crate) fn as_slice(&self) -> &[T] {
        self.items.get(..self.len).unwrap_or(&[])
    }
}

impl<T: Copy + Default, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default, const N: usize> Deref for Bounded<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy + Default, const N: usize> DerefMut for Bounded<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.items.get_mut(..self.len).unwrap_or(&mut [])
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for Bounded<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_capacity_and_keeps_order() {
        let mut b: Bounded<u32, 2> = Bounded::new();
        assert!(b.is_empty());
        assert_eq!(b.push(1), Ok(()));
        assert_eq!(b.push(2), Ok(()));
        assert!(b.is_full());
        assert_eq!(b.push(3), Err(3));
        assert_eq!(&b[..], &[1, 2]);
        b.sort_unstable_by(|x, y| y.cmp(x));
        assert_eq!(&b[..], &[2, 1]);
    }
}
