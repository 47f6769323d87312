#include "splash.h"

#ifndef SPLASH_VERSION_STRING
#define SPLASH_VERSION_STRING "0.0.0-dev"
#endif

int32_t splash_abi_version(void) { return SPLASH_ABI_VERSION; }

const char *splash_version(void) { return SPLASH_VERSION_STRING; }
