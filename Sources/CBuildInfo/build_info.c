#include "build_info.h"

// `make` writes commit.h (not tracked) with the output of `git describe`; only this file
// recompiles when it changes.
#if __has_include("commit.h")
#include "commit.h"
#endif

#ifndef DIFFCAST_COMMIT
#define DIFFCAST_COMMIT "unknown"
#endif

const char *diffcast_build_commit(void) { return DIFFCAST_COMMIT; }

#define DIFFCAST_VERSION "0.3.0"

const char *diffcast_version(void) { return DIFFCAST_VERSION; }
