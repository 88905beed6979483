# libFuzzer builds (-DVKATTN_FUZZ=ON, docs/fuzzing.md): every target of the
# project is compiled with coverage instrumentation for libFuzzer and with
# AddressSanitizer + UndefinedBehaviorSanitizer, so the library and the CLI
# sources the harnesses reach are instrumented; tests/fuzz/ adds one
# executable per harness, linked with libFuzzer itself. Included from the
# top-level CMakeLists.txt before any target is defined.
if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR
    "VKATTN_FUZZ=ON needs clang (libFuzzer is part of clang), but the C compiler is "
    "'${CMAKE_C_COMPILER_ID}' (${CMAKE_C_COMPILER}). Configure a new build directory with "
    "CC=clang, e.g. `CC=clang cmake -S . -B build-fuzz -DVKATTN_FUZZ=ON`, or run tools/fuzz.sh.")
endif()
if(VKATTN_SANITIZE_KIND STREQUAL "thread")
  message(FATAL_ERROR "VKATTN_FUZZ=ON builds with AddressSanitizer; it cannot be combined with "
                      "VKATTN_SANITIZE=thread")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer)
# Executables other than the harnesses (the CLI, the test suites) link the
# sanitizer runtimes, which also hold the coverage callbacks.
add_link_options(-fsanitize=address,undefined)
set(VKATTN_FUZZ_LINK_OPTIONS -fsanitize=fuzzer,address,undefined)
