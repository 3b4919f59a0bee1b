//! A pool of device buffers reused by size class (powers of two elements),
//! with hit and miss counts.
//!
//! The pool hands out owned [`PooledBuffer`]s that return their allocation on
//! drop, so a pooled buffer borrows nothing and can be kept anywhere.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use crate::error::Error;
use crate::{DeviceBuffer, GpuRepr, Stream};

/// How often the pool reused an allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Requests served from a cached allocation.
    pub hits: u64,
    /// Requests that allocated.
    pub misses: u64,
    /// Allocations cached now.
    pub cached: usize,
}

#[derive(Debug)]
struct PoolState<T: GpuRepr> {
    free: HashMap<usize, Vec<DeviceBuffer<T>>>,
    stats: PoolStats,
}

/// Reuses buffers of `T` allocated on one stream.
#[derive(Debug, Clone)]
pub struct BufferPool<T: GpuRepr> {
    stream: Stream,
    state: Arc<Mutex<PoolState<T>>>,
}

/// The size class of `len` elements: the next power of two (0 stays 0).
pub fn size_class(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.checked_next_power_of_two().unwrap_or(len)
    }
}

impl<T: GpuRepr> BufferPool<T> {
    /// An empty pool allocating on `stream`.
    pub fn new(stream: &Stream) -> Self {
        Self {
            stream: stream.clone(),
            state: Arc::new(Mutex::new(PoolState {
                free: HashMap::new(),
                stats: PoolStats::default(),
            })),
        }
    }

    /// A buffer of `len` elements: a cached allocation of the same size class
    /// (its contents are whatever was last written) or a new, zeroed one.
    pub fn take(&self, len: usize) -> Result<PooledBuffer<T>, Error> {
        let class = size_class(len);
        let cached = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let found = state.free.get_mut(&class).and_then(Vec::pop);
            if found.is_some() {
                state.stats.hits += 1;
                state.stats.cached -= 1;
            } else {
                state.stats.misses += 1;
            }
            found
        };
        let mut buffer = match cached {
            Some(buffer) => buffer,
            None => self.stream.alloc_zeros::<T>(class)?,
        };
        buffer.len = len;
        Ok(PooledBuffer {
            buffer: Some(buffer),
            class,
            pool: Arc::clone(&self.state),
        })
    }

    /// Hit and miss counts so far.
    pub fn stats(&self) -> PoolStats {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).stats
    }

    /// Frees every cached allocation.
    pub fn clear(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.free.clear();
        state.stats.cached = 0;
    }
}

/// A buffer from a [`BufferPool`]; its allocation goes back to the pool on drop.
#[derive(Debug)]
pub struct PooledBuffer<T: GpuRepr> {
    buffer: Option<DeviceBuffer<T>>,
    class: usize,
    pool: Arc<Mutex<PoolState<T>>>,
}

impl<T: GpuRepr> Deref for PooledBuffer<T> {
    type Target = DeviceBuffer<T>;
    fn deref(&self) -> &DeviceBuffer<T> {
        self.buffer.as_ref().expect("present until drop")
    }
}

impl<T: GpuRepr> DerefMut for PooledBuffer<T> {
    fn deref_mut(&mut self) -> &mut DeviceBuffer<T> {
        self.buffer.as_mut().expect("present until drop")
    }
}

impl<T: GpuRepr> PooledBuffer<T> {
    /// Takes the buffer out of the pool for good.
    pub fn detach(mut self) -> DeviceBuffer<T> {
        self.buffer.take().expect("present until drop")
    }
}

impl<T: GpuRepr> Drop for PooledBuffer<T> {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        // Never panics: a poisoned lock still guards a valid map.
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        state.free.entry(self.class).or_default().push(buffer);
        state.stats.cached += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 1);
        assert_eq!(size_class(3), 4);
        assert_eq!(size_class(4), 4);
        assert_eq!(size_class(1000), 1024);
    }
}
