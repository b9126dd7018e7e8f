# Debian packages of the install layout (cmake/install.cmake), one per component, by CPack:
#   hearth          the CLI, hearth-setup, the user and /var/lib/hearth: what the others share
#   hearth-broker   the broker and its unit; its keys (/etc/hearth/auth) made on install
#   hearth-node     the node and its unit; CPU only: no GPU library is linked (backends/README.md)
#   hearth-gateway  the OpenAI HTTP gateway and its unit
#   hearth-vulkan   libhearth-vulkan.so (pulls the Vulkan loader; a driver is recommended)
#   hearth-cuda     libhearth-cuda.so (needs the NVIDIA driver and cuBLAS)
# Build them with the prefix /usr (README: "Install from packages"):
#   cmake --preset release -DCMAKE_INSTALL_PREFIX=/usr && cmake --build --preset release
#   cd build/release && cpack
# dpkg-shlibdeps computes each package's library dependencies (Depends:) from its binaries.

set(HEARTH_CUDA_PACKAGE_DEPENDS "" CACHE STRING
    "Extra Depends of hearth-cuda, e.g. libcublas-13-0 (NVIDIA's repository) when cuBLAS is not from a Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hearth)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# The Maintainer field; lintian wants a real address (bogus-mail-host) for packages given out.
set(HEARTH_PACKAGE_MAINTAINER "hearth maintainers <hearth@localhost>" CACHE STRING
    "Maintainer of the Debian packages: Name <address>")
set(CPACK_PACKAGE_CONTACT "${HEARTH_PACKAGE_MAINTAINER}")
# Each package's description is its component's: the first line the synopsis.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
# Where dpkg-shlibdeps finds libraries that are not in the linker's path (CUDA's, when it is not
# installed from Debian packages); those it finds outside any package add no Depends.
if(TARGET CUDA::cublas)
  get_target_property(cublas_location CUDA::cublas IMPORTED_LOCATION)
  get_filename_component(cublas_dir "${cublas_location}" DIRECTORY)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${cublas_dir})
endif()

set(version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(CPACK_COMPONENTS_ALL cli broker node ${hearth_services})
list(REMOVE_DUPLICATES CPACK_COMPONENTS_ALL)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME hearth)
set(CPACK_COMPONENT_CLI_DESCRIPTION "LLM inference for a homelab: the hearth CLI
hearth turns the machines of a homelab into one LLM inference service: a broker
queues jobs, a node on each machine runs them on its CPU or GPU, and the OpenAI
HTTP gateway serves them. This package has the hearth CLI (submit and watch
jobs, run models locally, make keys) and what the service packages share: the
hearth system user and /var/lib/hearth.")
# adduser makes the hearth user (hearth-setup falls back to useradd).
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "adduser")

set(CPACK_DEBIAN_BROKER_PACKAGE_NAME hearth-broker)
set(CPACK_COMPONENT_BROKER_DESCRIPTION "LLM inference for a homelab: the broker
The broker queues jobs, hands them to nodes that can run them, relays the token
streams and records every job in SQLite (/var/lib/hearth/hearth.db). It serves
the LAN on port 5555 with CurveZMQ keys: only keys in /etc/hearth/auth get in.")

set(CPACK_DEBIAN_NODE_PACKAGE_NAME hearth-node)
set(CPACK_COMPONENT_NODE_DESCRIPTION "LLM inference for a homelab: a node
A node runs the broker's jobs on this machine with the models in
/var/lib/hearth/models, on the CPU; hearth-vulkan and hearth-cuda add GPUs.")

set(CPACK_DEBIAN_GATEWAY_PACKAGE_NAME hearth-gateway)
set(CPACK_COMPONENT_GATEWAY_DESCRIPTION "LLM inference for a homelab: the OpenAI HTTP API
hearth-gateway serves the broker's models through the OpenAI HTTP API
(chat completions, completions, models, batches) on 127.0.0.1:8080.")

set(CPACK_DEBIAN_VULKAN_PACKAGE_NAME hearth-vulkan)
set(CPACK_COMPONENT_VULKAN_DESCRIPTION "LLM inference for a homelab: the Vulkan backend
libhearth-vulkan.so lets hearth-node and the hearth CLI run models on any GPU
with a Vulkan driver.")
set(CPACK_DEBIAN_VULKAN_PACKAGE_RECOMMENDS "mesa-vulkan-drivers | vulkan-icd")

set(CPACK_DEBIAN_CUDA_PACKAGE_NAME hearth-cuda)
set(cuda_needs "")
if(CUDAToolkit_VERSION_MAJOR)
  set(cuda_needs "
It needs the NVIDIA driver and cuBLAS ${CUDAToolkit_VERSION_MAJOR} (libcublas.so.${CUDAToolkit_VERSION_MAJOR}, from
NVIDIA's CUDA repository: libcublas-${CUDAToolkit_VERSION_MAJOR}-x), which Debian does not package.")
endif()
set(CPACK_COMPONENT_CUDA_DESCRIPTION "LLM inference for a homelab: the CUDA backend
libhearth-cuda.so lets hearth-node and the hearth CLI run models on NVIDIA
GPUs.${cuda_needs}")

foreach(component broker node gateway vulkan cuda)
  string(TOUPPER ${component} c)
  set(CPACK_DEBIAN_${c}_PACKAGE_DEPENDS "hearth (= ${version})")
endforeach()
if(HEARTH_CUDA_PACKAGE_DEPENDS)
  string(APPEND CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS ", ${HEARTH_CUDA_PACKAGE_DEPENDS}")
endif()
foreach(module vulkan cuda)
  string(TOUPPER ${module} c)
  if(TARGET hearth-${module})
    list(APPEND CPACK_COMPONENTS_ALL ${module})
  endif()
endforeach()

# The maintainer scripts, from deploy/debian/*.in: hearth-setup ROLE, the unit, what purge removes.
set(setup ${CMAKE_INSTALL_FULL_LIBEXECDIR}/hearth/hearth-setup)
set(etc ${CMAKE_INSTALL_FULL_SYSCONFDIR}/hearth)
set(purge_cli "for d in /var/lib/hearth/models /var/lib/hearth ${etc}; do rmdir \"\$d\" 2>/dev/null || true; done")
set(purge_broker "rm -rf ${etc}/auth; rm -f ${etc}/broker.pub ${etc}/admin.key ${etc}/admin.pub /var/lib/hearth/hearth.db /var/lib/hearth/hearth.db-* /var/lib/hearth/hearth.db.lock")
set(purge_node "rm -f ${etc}/node.key ${etc}/node.pub")
set(purge_gateway "rm -f ${etc}/gateway.key ${etc}/gateway.pub /var/lib/hearth/gateway.db /var/lib/hearth/gateway.db-*")
foreach(component cli ${hearth_services})
  string(TOUPPER ${component} c)
  set(HEARTH_PACKAGE ${CPACK_DEBIAN_${c}_PACKAGE_NAME})
  set(HEARTH_SETUP ${setup})
  set(HEARTH_PURGE ${purge_${component}})
  set(dir ${PROJECT_BINARY_DIR}/debian/${component})
  if(component STREQUAL cli)
    set(HEARTH_ROLE base)
    set(HEARTH_UNIT "")
  else()
    set(HEARTH_ROLE ${component})
    set(HEARTH_UNIT hearth-${component}.service)
    file(WRITE ${dir}/conffiles "${etc}/${component}.yaml\n")
  endif()
  set(extra "")
  foreach(script postinst prerm postrm)
    configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/${script}.in ${dir}/${script} @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                    WORLD_READ WORLD_EXECUTE)
    list(APPEND extra ${dir}/${script})
  endforeach()
  if(EXISTS ${dir}/conffiles)
    list(APPEND extra ${dir}/conffiles)
  endif()
  set(CPACK_DEBIAN_${c}_PACKAGE_CONTROL_EXTRA ${extra})
endforeach()

# Packages are made for the prefix /usr: a build configured for another one would install its
# /etc files under /usr/local/etc. cpack reads this file (CPACK_PROJECT_CONFIG_FILE) and stops.
set(CPACK_HEARTH_CONFIGURED_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/packages-check.cmake)
include(CPack)
