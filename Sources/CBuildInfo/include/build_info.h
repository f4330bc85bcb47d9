#ifndef DIFFCAST_BUILD_INFO_H
#define DIFFCAST_BUILD_INFO_H

/// The commit the binary was built from (`git describe`, stamped by `make`), or "unknown".
const char *diffcast_build_commit(void);

#endif
