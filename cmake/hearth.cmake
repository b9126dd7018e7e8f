# Shared CMake helpers: warning flags for our own targets and one way to register tests.

# Compile options for every target built from hearth's own sources.
function(hearth_target_options target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers>
    $<$<AND:$<BOOL:${HEARTH_WERROR}>,$<COMPILE_LANGUAGE:CXX,C>>:-Werror>
    # GCC 12 reports false -Wrestrict/-Wstringop-overflow inside libstdc++'s std::string and
    # std::vector at -O3 (GCC bugs 105329, 105651); they say nothing about our code.
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<COMPILE_LANGUAGE:CXX>>:-Wno-restrict -Wno-stringop-overflow>
    # In a unity build (CMAKE_UNITY_BUILD, the asan preset) each source is an included file, so
    # GCC takes a class defined in a .cpp with members from its anonymous namespace (job_store's
    # and batch_store's impl) for one defined in a header.
    $<$<AND:$<BOOL:${CMAKE_UNITY_BUILD}>,$<CXX_COMPILER_ID:GNU>,$<COMPILE_LANGUAGE:CXX>>:-Wno-subobject-linkage>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# The optimisation of the code that does the work at test time, where it differs from the build
# type's: the engine and the GPU backends' host code (kernels, quantization, tokenizers, loading,
# mkmodel's generator). The asan preset builds these at -O1 and the daemons, the CLI and the
# gateway at -O0, which wait on each other and on the engine in the tests: at -O0 they compile in
# two thirds of the time (tools/cmd-cancel.cpp under the sanitizers: 8.8 s, 13.8 s at -O1).
set(HEARTH_ENGINE_OPT "" CACHE STRING "Optimisation flag for the engine and GPU backends (empty: the build type's)")

# The engine's optimisation (HEARTH_ENGINE_OPT) for one of its libraries.
function(hearth_engine_options target)
  if(HEARTH_ENGINE_OPT)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:${HEARTH_ENGINE_OPT}>)
  endif()
endfunction()

# Compile options for test code (test binaries and the libraries only tests link). It is compiled
# at -O1 in every optimised build, the asan preset's -O0 included: the code under test comes
# optimised from its library. Test code was 44% of a clean release build's compile time; at -O1
# it took 535 CPU-seconds instead of 652 (schema/codec_test.cpp: 40 s -> 29 s). Under the
# sanitizers at -O0 it compiled in 220 fewer CPU-seconds, and the tests ran 123 s longer.
function(hearth_test_code_options target)
  hearth_target_options(${target})
  target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O1>)
endfunction()

# hearth_test(NAME name SOURCES a.cpp ... LABELS unit|model|vulkan|cuda|slow [LIBS ...] [TIMEOUT s])
# Registers a GoogleTest binary with ctest under the given labels (../shared/STYLE.md 16).
function(hearth_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  hearth_test_code_options(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} hearth_testing GTest::gtest GTest::gtest_main)
  # Where the tree is, for tests that read files of it (example configs, test data). Not
  # __FILE__: ccache's base_dir makes that relative to the build folder.
  target_compile_definitions(${T_NAME} PRIVATE HEARTH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  # A test binary that cannot run here at all (a cuda test without a GPU) exits with 77 after
  # saying why (tests/testdata.h: skip_all); ctest then reports it skipped, not passed.
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77)
endfunction()

# hearth_tests_beside(PREFIX p LIBS ... [DIRS subdir ...]): every <name>_test.cpp in the current
# source folder (and the given subfolders) becomes the ctest test p_<name> ('-' -> '_'), label
# unit, linked with LIBS. Unit tests live beside the code they test. The target p_unit_tests builds
# them all, so a script that builds a subset (tests/aarch64.sh) cannot miss a new one.
function(hearth_tests_beside)
  cmake_parse_arguments(T "" "PREFIX" "LIBS;DIRS" ${ARGN})
  set(globs ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
  foreach(d ${T_DIRS})
    list(APPEND globs ${CMAKE_CURRENT_SOURCE_DIR}/${d}/*_test.cpp)
  endforeach()
  file(GLOB tests CONFIGURE_DEPENDS ${globs})
  if(NOT TARGET ${T_PREFIX}_unit_tests)
    add_custom_target(${T_PREFIX}_unit_tests)
  endif()
  foreach(src ${tests})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "_test$" "" name ${name})
    string(REPLACE "-" "_" name ${name})
    hearth_test(NAME ${T_PREFIX}_${name} SOURCES ${src} LABELS unit LIBS ${T_LIBS})
    add_dependencies(${T_PREFIX}_unit_tests ${T_PREFIX}_${name})
  endforeach()
endfunction()
