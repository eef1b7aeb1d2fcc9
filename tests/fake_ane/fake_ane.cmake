# The fake AppleNeuralEngine framework (Linux, x86-64 and aarch64): a shared library at
# build/fake_ane/AppleNeuralEngine.so that provides what the darwin runtime needs from
# macOS, running programs through a private copy of aneforge's MIL reader and CPU
# executor. Its tests run the runtime against it, one ctest case per process (the
# compile budget is per process).
if(NOT APPLE AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|aarch64|arm64)$")
  enable_language(ASM)
  set(FAKE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/tests/fake_ane)
  add_library(fake_ane SHARED ${FAKE_DIR}/objc.c ${FAKE_DIR}/msgsend.S ${FAKE_DIR}/cf.c ${FAKE_DIR}/iosurface.c
                              ${FAKE_DIR}/ane_classes.c ${FAKE_DIR}/netplist_prog.c)
  target_include_directories(fake_ane PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/darwin_stubs ${CMAKE_CURRENT_SOURCE_DIR}/src ${FAKE_DIR})
  target_link_libraries(fake_ane PRIVATE aneforge_static)
  target_link_options(fake_ane PRIVATE -Wl,--version-script=${FAKE_DIR}/exports.map)
  set_target_properties(fake_ane PROPERTIES OUTPUT_NAME AppleNeuralEngine PREFIX "" SUFFIX ".so"
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fake_ane
                        LINK_DEPENDS ${FAKE_DIR}/exports.map)

  add_executable(test_ane_runtime ${FAKE_DIR}/test_ane_runtime.c)
  target_link_libraries(test_ane_runtime PRIVATE af_test_support)
  target_include_directories(test_ane_runtime PRIVATE ${FAKE_DIR})
  target_compile_definitions(test_ane_runtime PRIVATE AF_FAKE_ANE="$<TARGET_FILE:fake_ane>" AF_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
  add_dependencies(test_ane_runtime fake_ane)
  foreach(case trampoline missing programs cache alias budget load_retry traps device netplist weights model_path compile_failure no_inputs layouts)
    add_test(NAME ane_runtime_${case} COMMAND test_ane_runtime ${case})
    set_tests_properties(ane_runtime_${case} PROPERTIES TIMEOUT 120
                         ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-${case};OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16")
  endforeach()

  # The compile entry point under each macOS profile of the fake (FAKE_ANE_MACOS), and
  # whole cases run through the fallback (26: the in-memory compile fails, 14: it is absent).
  foreach(os 14 15 26)
    add_test(NAME ane_runtime_entry_macos${os} COMMAND test_ane_runtime entry)
    set_tests_properties(ane_runtime_entry_macos${os} PROPERTIES TIMEOUT 120
                         ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-entry-${os};OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16;FAKE_ANE_MACOS=${os}")
  endforeach()
  foreach(case programs netplist layouts)
    foreach(os 14 26)
      add_test(NAME ane_runtime_${case}_macos${os} COMMAND test_ane_runtime ${case})
      set_tests_properties(ane_runtime_${case}_macos${os} PROPERTIES TIMEOUT 120
                           ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-${case}-${os};OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16;FAKE_ANE_MACOS=${os}")
    endforeach()
  endforeach()

  # The same cases against the runtime's Apple branch (ANE_RT_LINKED: libobjc,
  # CoreFoundation and IOSurface symbols linked at build time, as on macOS), compiled
  # here against the SDK-signature stubs and linked to the fake framework. The darwin
  # sources built into this test define every symbol the library's copy would, so the
  # linker never pulls the library's (dlopen) copy in.
  file(GLOB AF_DARWIN_RT_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/ane/darwin/*.c)
  add_executable(test_ane_runtime_linked ${FAKE_DIR}/test_ane_runtime.c ${AF_DARWIN_RT_SOURCES})
  target_include_directories(test_ane_runtime_linked BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests/darwin_stubs ${FAKE_DIR})
  target_compile_definitions(test_ane_runtime_linked PRIVATE ANE_RT_LINKED=1 AF_FAKE_ANE="$<TARGET_FILE:fake_ane>" AF_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
  target_link_libraries(test_ane_runtime_linked PRIVATE fake_ane af_test_support)
  foreach(case trampoline programs cache alias budget load_retry traps device netplist weights model_path compile_failure no_inputs layouts)
    add_test(NAME ane_runtime_linked_${case} COMMAND test_ane_runtime_linked ${case})
    set_tests_properties(ane_runtime_linked_${case} PROPERTIES TIMEOUT 120
                         ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-linked-${case};OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16")
  endforeach()
  foreach(os 14 26)
    add_test(NAME ane_runtime_linked_entry_macos${os} COMMAND test_ane_runtime_linked entry)
    set_tests_properties(ane_runtime_linked_entry_macos${os} PROPERTIES TIMEOUT 120
                         ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-linked-entry-${os};OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16;FAKE_ANE_MACOS=${os}")
  endforeach()

  # The ane backend (AF_TARGET_ANE) end to end against the fake: every op, the family,
  # resident state, the compile budget, the training plans.
  add_executable(test_ane_backend ${FAKE_DIR}/test_ane_backend.c)
  target_link_libraries(test_ane_backend PRIVATE af_test_support)
  target_include_directories(test_ane_backend PRIVATE ${FAKE_DIR})
  target_compile_definitions(test_ane_backend PRIVATE AF_FAKE_ANE="$<TARGET_FILE:fake_ane>")
  add_dependencies(test_ane_backend fake_ane)
  foreach(case ops family state state_copy budget train train_copy bridges)
    add_test(NAME ane_backend_${case} COMMAND test_ane_backend ${case})
    set_tests_properties(ane_backend_${case} PROPERTIES TIMEOUT 300
                         ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-backend-${case};OPENBLAS_NUM_THREADS=1;FAKE_ANE_COMPILE_BUDGET=100000;FAKE_ANE_SUBTYPE=h16")
  endforeach()

  # Past a small daemon budget: programs compiled before reload without compiling.
  add_test(NAME ane_backend_budget_reload COMMAND test_ane_backend budget_reload)
  set_tests_properties(ane_backend_budget_reload PROPERTIES TIMEOUT 120
                       ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-backend-budget-reload;OPENBLAS_NUM_THREADS=1;FAKE_ANE_COMPILE_BUDGET=4;FAKE_ANE_SUBTYPE=h16")

  # `aneforge train --target ane` on the MNIST subset agrees with ane-sim (a short form of
  # the full MNIST run README reports).
  add_test(NAME cli_train_ane COMMAND sh ${FAKE_DIR}/cli_train_ane.sh $<TARGET_FILE:aneforge> $<TARGET_FILE:fake_ane>
           ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/fake_ane/cli-train)
  # Sanitizer builds run the MLP only (the CNN runs take minutes there).
  if(AF_SANITIZE OR AF_SANITIZE_THREAD)
    set(AF_CLI_TRAIN_QUICK 1)
  else()
    set(AF_CLI_TRAIN_QUICK 0)
  endif()
  set_tests_properties(cli_train_ane PROPERTIES TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;ANEFORGE_PRECISION_CHECK=0;AF_CLI_TRAIN_QUICK=${AF_CLI_TRAIN_QUICK}")

  # aneforge doctor against the fake, and without a framework.
  add_executable(test_doctor ${FAKE_DIR}/test_doctor.c)
  target_link_libraries(test_doctor PRIVATE af_test_support)
  target_compile_definitions(test_doctor PRIVATE AF_FAKE_ANE="$<TARGET_FILE:fake_ane>" AF_CLI="$<TARGET_FILE:aneforge>")
  add_dependencies(test_doctor fake_ane aneforge)
  add_test(NAME test_doctor COMMAND test_doctor)
  set_tests_properties(test_doctor PROPERTIES TIMEOUT 120
                       ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-doctor;OPENBLAS_NUM_THREADS=1")

  # A refusal the compiler gives no reason for (macOS 26) names the likely op and limit.
  add_test(NAME ane_backend_diagnose COMMAND test_ane_backend diagnose)
  set_tests_properties(ane_backend_diagnose PROPERTIES TIMEOUT 120
                       ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-backend-diagnose;OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16;FAKE_ANE_FAMILY=${CMAKE_CURRENT_SOURCE_DIR}/tests/fake_ane/families/z9.json")
  # The fake configured as Z9 enforces the walls the probe bisects (surface rows, inputs, matmul overflow).
  add_executable(test_probe_walls ${FAKE_DIR}/test_probe_walls.c)
  target_link_libraries(test_probe_walls PRIVATE af_test_support)
  target_include_directories(test_probe_walls PRIVATE ${FAKE_DIR})
  target_compile_definitions(test_probe_walls PRIVATE AF_FAKE_ANE="$<TARGET_FILE:fake_ane>")
  add_dependencies(test_probe_walls fake_ane)
  add_test(NAME probe_walls COMMAND test_probe_walls)
  set_tests_properties(probe_walls PROPERTIES TIMEOUT 120
                       ENVIRONMENT "TMPDIR=${CMAKE_BINARY_DIR}/fake_ane/tmp-probe-walls;OPENBLAS_NUM_THREADS=1;FAKE_ANE_SUBTYPE=h16;FAKE_ANE_FAMILY=${CMAKE_CURRENT_SOURCE_DIR}/tests/fake_ane/families/z9.json")
  # doctor --probe against the fake configured as four chips (A13, A16, H17 and the made-up Z9) (tests/fake_ane/families/).
  add_test(NAME probe_chips COMMAND sh ${FAKE_DIR}/probe_chips.sh $<TARGET_FILE:aneforge> $<TARGET_FILE:fake_ane>
           $<TARGET_FILE:test_ane_backend> ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_BINARY_DIR}/fake_ane/probe-chips)
  set_tests_properties(probe_chips PROPERTIES TIMEOUT 600)
endif()
