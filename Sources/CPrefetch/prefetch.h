#ifndef DIFFCAST_CPREFETCH_H
#define DIFFCAST_CPREFETCH_H

/* Asks the CPU to start loading the cache line at `address` now, for a read soon after. A full
   diff's hash table is larger than the caches and each lookup lands on a random line; issuing
   this a few lookups ahead lets those misses overlap instead of stalling one after another.
   It is only a hint: any address is allowed and nothing is read or faulted. */
static inline void dc_prefetch(const void *address) { __builtin_prefetch(address, 0, 3); }

#endif
