# Read by cpack (CPACK_PROJECT_CONFIG_FILE, cmake/packages.cmake): packages need a build
# configured with the prefix they install to, or /etc and the units' paths would be wrong.
if(NOT CPACK_PACKAGING_INSTALL_PREFIX STREQUAL CPACK_HEARTH_CONFIGURED_PREFIX)
  message(FATAL_ERROR "hearth: this build is configured with CMAKE_INSTALL_PREFIX="
                      "${CPACK_HEARTH_CONFIGURED_PREFIX}; the packages install to "
                      "${CPACK_PACKAGING_INSTALL_PREFIX}. Configure with "
                      "-DCMAKE_INSTALL_PREFIX=${CPACK_PACKAGING_INSTALL_PREFIX} first.")
endif()
