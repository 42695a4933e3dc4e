# Helpers shared by every directory.

# rocetune_library(NAME SRCS ... DEPS ...): a static library with the project's warnings.
function(rocetune_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/proto)
  target_compile_options(${name} PRIVATE ${ROCETUNE_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# rocetune_binary(NAME SRCS ... DEPS ...): an executable with the project's warnings.
function(rocetune_binary name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/proto)
  target_compile_options(${name} PRIVATE ${ROCETUNE_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()

# rocetune_test(NAME SRCS ... DEPS ... LABEL unit|integration|e2e|vm [TIMEOUT s] [TSAN]):
# a GoogleTest binary registered with ctest under the given label. In the sanitizer
# build (ROCETUNE_UNIT_ONLY) only unit tests are built. TSAN: a concurrency test,
# also labelled `tsan` and built by the `tsan_tests` target (the ThreadSanitizer pass).
function(rocetune_test name)
  cmake_parse_arguments(ARG "TSAN" "LABEL;TIMEOUT" "SRCS;DEPS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(ROCETUNE_UNIT_ONLY AND NOT ARG_LABEL STREQUAL "unit")
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SRCS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/proto)
  target_compile_options(${name} PRIVATE ${ROCETUNE_WARNINGS})
  target_compile_definitions(${name} PRIVATE
    ROCETUNE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ROCETUNE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # Every test may use tests/testing/test_support.h.
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} rocetune_test_support GTest::gtest GTest::gmock
    GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_LABEL STREQUAL "unit")
    set_property(GLOBAL APPEND PROPERTY ROCETUNE_UNIT_TESTS ${name})
  endif()
  set(_labels ${ARG_LABEL})
  if(ARG_TSAN)
    list(APPEND _labels tsan)
    set_property(GLOBAL APPEND PROPERTY ROCETUNE_TSAN_TESTS ${name})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${_labels}" TIMEOUT ${ARG_TIMEOUT})
  if(ROCETUNE_TSAN AND ARG_TSAN)
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/tsan/absl_sync_annotations.cc)
    target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS})
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=${PROJECT_SOURCE_DIR}/tests/tsan/suppressions.txt")
  endif()
endfunction()

# `unit_tests`: builds every unit test (the sanitizer pass builds only this).
function(rocetune_define_unit_tests_target)
  get_property(_tests GLOBAL PROPERTY ROCETUNE_UNIT_TESTS)
  add_custom_target(unit_tests DEPENDS ${_tests})
  get_property(_tsan GLOBAL PROPERTY ROCETUNE_TSAN_TESTS)
  add_custom_target(tsan_tests DEPENDS ${_tsan})
endfunction()
