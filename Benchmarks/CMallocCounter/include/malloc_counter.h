#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H

/// Allocations (malloc, calloc, realloc, the aligned ones) made by the whole process since it
/// started, and the bytes they asked for: this library's malloc family stands in front of glibc's
/// for every library of an executable that links it (symbol interposition), as swift-nio's and
/// ordo-one/benchmark's malloc counters do.
unsigned long long dc_allocation_count(void);
unsigned long long dc_allocated_bytes(void);
/// Bytes of the heap in use now (glibc's mallinfo2 `uordblks + hblkhd`: live allocations with
/// their chunk headers and padding, including the large ones glibc maps on their own).
unsigned long long dc_heap_in_use(void);

#endif
