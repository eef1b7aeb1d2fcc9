# Compile check of the Apple-only Neural Engine runtime (src/ane/darwin) on other
# systems: every darwin source is compiled against the stub declarations in
# tests/darwin_stubs with warnings as errors, as the ctest case darwin_stub_compile.
# Included from the top CMakeLists.txt; on Apple the real build compiles these files.
if(NOT APPLE)
  file(GLOB AF_DARWIN_CHECK_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/ane/darwin/*.c)
  if(AF_DARWIN_CHECK_SOURCES)
    add_test(NAME darwin_stub_compile
             COMMAND ${CMAKE_C_COMPILER} -std=c11 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter
                     -I${CMAKE_CURRENT_SOURCE_DIR}/tests/darwin_stubs -I${CMAKE_CURRENT_SOURCE_DIR}/include -I${CMAKE_CURRENT_SOURCE_DIR}/src
                     ${AF_DARWIN_CHECK_SOURCES})
  endif()
endif()
