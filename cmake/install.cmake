# The install layout (`cmake --install`, and the Debian packages: cmake/packages.cmake). Each rule
# names its package as a component: cli (the hearth CLI and what every package shares), broker,
# node, gateway, and one per GPU backend module (backends/CMakeLists.txt). With the prefix /usr:
#   /usr/bin/hearth, hearth-broker, hearth-node, hearth-gateway
#   /usr/lib/hearth/libhearth-{cuda,vulkan}.so   ../lib/hearth from the executables (backends/modules.h);
#                                                 not CMAKE_INSTALL_LIBDIR (multiarch on Debian)
#   /etc/hearth/{broker,node,gateway}.yaml        the examples in deploy/ with the services' paths
#   /lib/systemd/system/hearth-*.service          deploy/'s units, with this layout's paths
#   /usr/libexec/hearth/hearth-setup              the user, folders and keys (deploy/debian/)
#   /usr/share/doc/hearth/README.md, /usr/share/doc/hearth-{broker,node,gateway}/*.example.yaml
# State (/var/lib/hearth: the job database, models/; the units' StateDirectory, whatever the
# prefix) and keys are made by hearth-setup, not installed. Another prefix (/usr/local) moves the
# rest, /etc to PREFIX/etc (GNUInstallDirs).

# systemd reads units from /lib/systemd/system (Debian's packages) and
# /usr/local/lib/systemd/system (local installs), not from another prefix's lib/.
set(HEARTH_SYSTEMD_UNIT_DIR "" CACHE PATH
    "Where the systemd units are installed (empty: /lib/systemd/system for the prefix /usr, else PREFIX/lib/systemd/system)")
if(HEARTH_SYSTEMD_UNIT_DIR)
  set(hearth_unit_dir ${HEARTH_SYSTEMD_UNIT_DIR})
elseif(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(hearth_unit_dir /lib/systemd/system)
else()
  set(hearth_unit_dir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
endif()

set(HEARTH_PACKAGED_DIR ${PROJECT_BINARY_DIR}/packaged)
set(hearth_etc ${CMAKE_INSTALL_FULL_SYSCONFDIR}/hearth)

# hearth_packaged_file(IN file OUT name [REPLACE old new ...]): IN with each old text replaced
# by new, as ${HEARTH_PACKAGED_DIR}/name. A replacement that finds nothing stops the configure:
# the files in deploy/ changed and the packaged ones would silently keep the old defaults.
function(hearth_packaged_file)
  cmake_parse_arguments(P "" "IN;OUT;HEADER" "REPLACE" ${ARGN})
  file(READ ${P_IN} text)
  list(LENGTH P_REPLACE n)
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE 0 ${last} 2)
      math(EXPR j "${i} + 1")
      list(GET P_REPLACE ${i} old)
      list(GET P_REPLACE ${j} new)
      string(FIND "${text}" "${old}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "hearth_packaged_file: '${old}' is not in ${P_IN} any more; "
                            "update cmake/install.cmake")
      endif()
      string(REPLACE "${old}" "${new}" text "${text}")
    endforeach()
  endif()
  set(out ${HEARTH_PACKAGED_DIR}/${P_OUT})
  set(old_text "")
  if(EXISTS ${out})
    file(READ ${out} old_text)
  endif()
  if(NOT old_text STREQUAL "${P_HEADER}${text}")
    file(WRITE ${out} "${P_HEADER}${text}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${P_IN})
endfunction()

install(TARGETS hearth RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(TARGETS hearth-broker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT broker)
install(TARGETS hearth-node RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT node)
set(hearth_services broker node)
if(TARGET hearth-gateway)
  install(TARGETS hearth-gateway RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT gateway)
  list(APPEND hearth_services gateway)
endif()

# The configs: deploy/'s examples (every setting, with its default and meaning) with what the
# packaged services need. The broker serves the LAN, with CURVE keys (hearth-setup makes them);
# the node and the gateway connect with theirs to the broker on this machine until told otherwise.
set(packaged_header "# /etc/hearth/@name@.yaml, read by hearth-@name@.service: deploy/@name@.example.yaml
# with the packaged service's settings (the keys are made by /usr/libexec/hearth/hearth-setup
# when the package is installed). The README's \"Install from packages\" says what to change.
")
foreach(name ${hearth_services})
  string(CONFIGURE "${packaged_header}" header @ONLY)
  set(replace_broker
    "bind: tcp://127.0.0.1:5555   # anything but loopback needs auth (or insecure: true)"
    "bind: tcp://0.0.0.0:5555     # the LAN: only keys in auth's folders get in"
    "# auth: /etc/hearth/auth" "auth: ${hearth_etc}/auth"
    "\ndb: hearth.db" "\ndb: /var/lib/hearth/hearth.db")
  set(replace_node
    "# broker_key: /etc/hearth/broker.pub" "broker_key: ${hearth_etc}/broker.pub"
    "# key: /etc/hearth/node.key" "key: ${hearth_etc}/node.key")
  set(replace_gateway
    "# broker_key: /etc/hearth/broker.pub" "broker_key: ${hearth_etc}/broker.pub"
    "# key: /etc/hearth/gateway.key" "key: ${hearth_etc}/gateway.key"
    "\ndb: gateway.db " "\ndb: /var/lib/hearth/gateway.db ")
  hearth_packaged_file(IN ${PROJECT_SOURCE_DIR}/deploy/${name}.example.yaml OUT ${name}.yaml
                       HEADER "${header}" REPLACE ${replace_${name}})
  install(FILES ${HEARTH_PACKAGED_DIR}/${name}.yaml DESTINATION ${hearth_etc} COMPONENT ${name})
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/${name}.example.yaml
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/hearth-${name} COMPONENT ${name})

  # The units name /usr/bin and /etc/hearth (the packages' layout); another prefix gets its own.
  hearth_packaged_file(IN ${PROJECT_SOURCE_DIR}/deploy/hearth-${name}.service
                       OUT hearth-${name}.service
                       REPLACE "/usr/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/"
                               "/etc/hearth/" "${hearth_etc}/")
  install(FILES ${HEARTH_PACKAGED_DIR}/hearth-${name}.service
          DESTINATION ${hearth_unit_dir} COMPONENT ${name})
endforeach()

hearth_packaged_file(IN ${PROJECT_SOURCE_DIR}/deploy/debian/hearth-setup OUT hearth-setup
                     REPLACE "/usr/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/" "/etc/hearth" "${hearth_etc}")
install(PROGRAMS ${HEARTH_PACKAGED_DIR}/hearth-setup DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/hearth COMPONENT cli)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)
