#include "suites.h"
Suite *suite_session(void) { return suite_create("session"); }
