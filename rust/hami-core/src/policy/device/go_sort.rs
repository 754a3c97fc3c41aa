//! Go's `sort.Sort` (pattern-defeating quicksort, Go 1.19 and later), comparison for comparison.
//!
//! HAMi orders a node's devices with `sort.Sort`. Up to 12 devices that is an insertion sort, so
//! stable; beyond, equal devices end up wherever this exact sequence of comparisons and swaps
//! leaves them, and Fit's choice among equal cards follows. Only the same algorithm gives the same
//! order. Indexes are `isize` as Go's `int`: some loops step one past the range they work on.

/// Sorts `data` in place as Go's `sort.Sort` would, `less(x, y)` being `Less` on two elements.
pub fn sort(data: &mut [usize], less: impl Fn(usize, usize) -> bool) {
    let n = data.len() as isize;
    if n <= 1 {
        return;
    }
    let mut s = Sorter { data, less };
    s.pdqsort(0, n, bits_len(n));
}

/// Go's `bits.Len`: the number of bits needed to represent `n`.
fn bits_len(n: isize) -> u32 {
    usize::BITS - (n as usize).leading_zeros()
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

struct Sorter<'a, F> {
    data: &'a mut [usize],
    less: F,
}

impl<F: Fn(usize, usize) -> bool> Sorter<'_, F> {
    fn lt(&self, i: isize, j: isize) -> bool {
        (self.less)(self.data[i as usize], self.data[j as usize])
    }

    fn swap(&mut self, i: isize, j: isize) {
        self.data.swap(i as usize, j as usize);
    }

    fn insertion_sort(&mut self, a: isize, b: isize) {
        for i in a + 1..b {
            let mut j = i;
            while j > a && self.lt(j, j - 1) {
                self.swap(j, j - 1);
                j -= 1;
            }
        }
    }

    fn sift_down(&mut self, lo: isize, hi: isize, first: isize) {
        let mut root = lo;
        loop {
            let mut child = 2 * root + 1;
            if child >= hi {
                return;
            }
            if child + 1 < hi && self.lt(first + child, first + child + 1) {
                child += 1;
            }
            if !self.lt(first + root, first + child) {
                return;
            }
            self.swap(first + root, first + child);
            root = child;
        }
    }

    fn heap_sort(&mut self, a: isize, b: isize) {
        let (first, hi) = (a, b - a);
        for i in (0..=(hi - 1) / 2).rev() {
            self.sift_down(i, hi, first);
        }
        for i in (0..hi).rev() {
            self.swap(first, first + i);
            self.sift_down(0, i, first);
        }
    }

    fn pdqsort(&mut self, mut a: isize, mut b: isize, mut limit: u32) {
        const MAX_INSERTION: isize = 12;
        let (mut was_balanced, mut was_partitioned) = (true, true);
        loop {
            let length = b - a;
            if length <= MAX_INSERTION {
                self.insertion_sort(a, b);
                return;
            }
            if limit == 0 {
                self.heap_sort(a, b);
                return;
            }
            if !was_balanced {
                self.break_patterns(a, b);
                limit -= 1;
            }
            let (mut pivot, mut hint) = self.choose_pivot(a, b);
            if hint == Hint::Decreasing {
                self.reverse_range(a, b);
                pivot = (b - 1) - (pivot - a);
                hint = Hint::Increasing;
            }
            if was_balanced && was_partitioned && hint == Hint::Increasing && self.partial_insertion_sort(a, b) {
                return;
            }
            if a > 0 && !self.lt(a - 1, pivot) {
                a = self.partition_equal(a, b, pivot);
                continue;
            }
            let (mid, already) = self.partition(a, b, pivot);
            was_partitioned = already;
            let (left, right) = (mid - a, b - mid);
            let balance_threshold = length / 8;
            if left < right {
                was_balanced = left >= balance_threshold;
                self.pdqsort(a, mid, limit);
                a = mid + 1;
            } else {
                was_balanced = right >= balance_threshold;
                self.pdqsort(mid + 1, b, limit);
                b = mid;
            }
        }
    }

    fn partition(&mut self, a: isize, b: isize, pivot: isize) -> (isize, bool) {
        self.swap(a, pivot);
        let (mut i, mut j) = (a + 1, b - 1);
        while i <= j && self.lt(i, a) {
            i += 1;
        }
        while i <= j && !self.lt(j, a) {
            j -= 1;
        }
        if i > j {
            self.swap(j, a);
            return (j, true);
        }
        self.swap(i, j);
        i += 1;
        j -= 1;
        loop {
            while i <= j && self.lt(i, a) {
                i += 1;
            }
            while i <= j && !self.lt(j, a) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
        self.swap(j, a);
        (j, false)
    }

    fn partition_equal(&mut self, a: isize, b: isize, pivot: isize) -> isize {
        self.swap(a, pivot);
        let (mut i, mut j) = (a + 1, b - 1);
        loop {
            while i <= j && !self.lt(a, i) {
                i += 1;
            }
            while i <= j && self.lt(a, j) {
                j -= 1;
            }
            if i > j {
                return i;
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }

    fn partial_insertion_sort(&mut self, a: isize, b: isize) -> bool {
        const MAX_STEPS: usize = 5;
        const SHORTEST_SHIFTING: isize = 50;
        let mut i = a + 1;
        for _ in 0..MAX_STEPS {
            while i < b && !self.lt(i, i - 1) {
                i += 1;
            }
            if i == b {
                return true;
            }
            if b - a < SHORTEST_SHIFTING {
                return false;
            }
            self.swap(i, i - 1);
            if i - a >= 2 {
                // Go shifts down to index 1 of the whole slice, not of the range.
                let mut j = i - 1;
                while j >= 1 && self.lt(j, j - 1) {
                    self.swap(j, j - 1);
                    j -= 1;
                }
            }
            if b - i >= 2 {
                let mut j = i + 1;
                while j < b && self.lt(j, j - 1) {
                    self.swap(j, j - 1);
                    j += 1;
                }
            }
        }
        false
    }

    fn break_patterns(&mut self, a: isize, b: isize) {
        let length = b - a;
        if length < 8 {
            return;
        }
        let mut random = length as u64;
        let modulus = 1u64 << bits_len(length);
        let middle = a + (length / 4) * 2;
        for idx in middle - 1..=middle + 1 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            let mut other = (random & (modulus - 1)) as isize;
            if other >= length {
                other -= length;
            }
            self.swap(idx, a + other);
        }
    }

    fn choose_pivot(&mut self, a: isize, b: isize) -> (isize, Hint) {
        const SHORTEST_NINTHER: isize = 50;
        const MAX_SWAPS: usize = 4 * 3;
        let l = b - a;
        let mut swaps = 0usize;
        let (mut i, mut j, mut k) = (a + l / 4, a + l / 4 * 2, a + l / 4 * 3);
        if l >= 8 {
            if l >= SHORTEST_NINTHER {
                i = self.median(i - 1, i, i + 1, &mut swaps);
                j = self.median(j - 1, j, j + 1, &mut swaps);
                k = self.median(k - 1, k, k + 1, &mut swaps);
            }
            j = self.median(i, j, k, &mut swaps);
        }
        let hint = match swaps {
            0 => Hint::Increasing,
            MAX_SWAPS => Hint::Decreasing,
            _ => Hint::Unknown,
        };
        (j, hint)
    }

    fn order2(&self, a: isize, b: isize, swaps: &mut usize) -> (isize, isize) {
        if self.lt(b, a) {
            *swaps += 1;
            return (b, a);
        }
        (a, b)
    }

    fn median(&self, a: isize, b: isize, c: isize, swaps: &mut usize) -> isize {
        let (a, b) = self.order2(a, b, swaps);
        let (b, _) = self.order2(b, c, swaps);
        let (_, b) = self.order2(a, b, swaps);
        b
    }

    fn reverse_range(&mut self, a: isize, b: isize) {
        let (mut i, mut j) = (a, b - 1);
        while i < j {
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go_order(keys: &[i32]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        sort(&mut order, |x, y| keys[x] < keys[y]);
        assert!(order.windows(2).all(|w| keys[w[0]] <= keys[w[1]]));
        order
    }

    // Expected orders: Go 1.26's `sort.Sort` over the same keys (Less compares keys only, so the
    // order among equal keys is the algorithm's), recorded with a small Go program.

    #[test]
    fn ties_land_where_go_leaves_them() {
        let keys = [3, 1, 2, 1, 3, 0, 2, 1, 0, 3, 2, 1, 0, 2, 3, 1, 0, 2, 1, 3];
        assert_eq!(go_order(&keys), [5, 16, 12, 8, 15, 11, 18, 7, 3, 1, 10, 2, 13, 17, 6, 4, 14, 0, 9, 19]);
    }

    #[test]
    fn long_lists_take_the_ninther_and_the_pattern_breaker() {
        let keys = [
            0, 2, 0, 2, 3, 1, 2, 2, 1, 1, 1, 3, 2, 2, 1, 2, 1, 2, 2, 0, 0, 3, 3, 2, 1, 0, 3, 1, 2, 2, 1, 2, 2, 2, 0, 3,
            3, 0, 0, 0, 3, 2, 0, 1, 2, 2, 2, 0, 2, 1, 1, 3, 1, 3, 1, 2, 2, 3, 0, 2, 1, 2, 1, 0,
        ];
        let expected = [
            0, 63, 2, 34, 37, 25, 58, 38, 39, 42, 20, 19, 47, 54, 10, 49, 16, 50, 43, 52, 14, 9, 8, 30, 24, 5, 60, 27,
            62, 15, 46, 31, 32, 33, 28, 1, 3, 61, 23, 59, 6, 41, 56, 18, 44, 45, 29, 17, 48, 13, 12, 55, 7, 53, 11, 51,
            21, 57, 40, 22, 4, 26, 36, 35,
        ];
        assert_eq!(go_order(&keys), expected);
    }

    #[test]
    fn a_descending_list_is_reversed_first() {
        let keys: Vec<i32> = (0..40).map(|i| (40 - i) / 3).collect();
        let expected = [
            39, 38, 35, 37, 36, 32, 34, 33, 31, 30, 29, 28, 27, 26, 23, 25, 24, 20, 21, 22, 19, 18, 17, 14, 16, 15, 12,
            13, 11, 8, 10, 9, 7, 6, 5, 4, 3, 2, 0, 1,
        ];
        assert_eq!(go_order(&keys), expected);
    }

    #[test]
    fn up_to_twelve_is_a_stable_insertion_sort() {
        let keys = [2, 1, 2, 1, 0, 2, 1, 0, 2, 1, 0, 1];
        let mut stable: Vec<usize> = (0..keys.len()).collect();
        stable.sort_by_key(|&i| keys[i]);
        assert_eq!(go_order(&keys), stable);
    }
}
