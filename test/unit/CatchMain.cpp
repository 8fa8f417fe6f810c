// The one Catch2 main for the unit-test binary; test files only include the header.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
