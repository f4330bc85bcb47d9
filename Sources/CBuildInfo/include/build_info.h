#ifndef DIFFCAST_BUILD_INFO_H
#define DIFFCAST_BUILD_INFO_H

/// The commit the binary was built from (`git describe`, stamped by `make`), or "unknown".
const char *diffcast_build_commit(void);

/// The release version of diffcastd and diffcast (one number for both; `make` reads it here).
const char *diffcast_version(void);

#endif
