# Checks of the source tree that run with the tests (ctest -L checks).
#   layering            tools/check_layers.py: layer rules and no dependency
#                       cycle between files (docs/architecture.md)
#   layering_self_test  the same check with forbidden edges injected: each
#                       must be reported, so the check itself is tested
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME layering
         COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check_layers.py
                 --build ${PROJECT_BINARY_DIR} --source ${PROJECT_SOURCE_DIR})
add_test(NAME layering_self_test
         COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/check_layers.py
                 --build ${PROJECT_BINARY_DIR} --source ${PROJECT_SOURCE_DIR} --self-test)
set_tests_properties(layering layering_self_test PROPERTIES LABELS "checks;cpu" TIMEOUT 300)
