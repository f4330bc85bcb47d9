#ifndef CFUZZERDRIVER_H
#define CFUZZERDRIVER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver (in libclang_rt.fuzzer, linked by -sanitize=fuzzer). SwiftPM links an
// executable target with `--defsym main=<module>_main`, so libFuzzer's own `main` is never
// linked in; each target's `@main` calls this instead, with its `LLVMFuzzerTestOneInput`.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
