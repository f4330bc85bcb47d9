// Only the declaration in include/CFuzzerDriver.h matters; SwiftPM wants a source file.
#include "CFuzzerDriver.h"
