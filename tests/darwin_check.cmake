# Compile check of the Apple branch of the Neural Engine runtime (src/ane/darwin) on
# other systems: every darwin source is compiled as macOS compiles it (ANE_RT_LINKED:
# the SDK headers, linked symbols) against the declarations in tests/darwin_stubs, with
# warnings as errors, as the ctest case darwin_stub_compile. The other branch (dlopen)
# is what the library builds here and the fake-framework tests run.
if(NOT APPLE)
  file(GLOB AF_DARWIN_CHECK_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/ane/darwin/*.c)
  if(AF_DARWIN_CHECK_SOURCES)
    add_test(NAME darwin_stub_compile
             COMMAND ${CMAKE_C_COMPILER} -std=c11 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter
                     -DANE_RT_LINKED=1
                     -I${CMAKE_CURRENT_SOURCE_DIR}/tests/darwin_stubs -I${CMAKE_CURRENT_SOURCE_DIR}/include -I${CMAKE_CURRENT_SOURCE_DIR}/src
                     ${AF_DARWIN_CHECK_SOURCES})
  endif()
endif()
