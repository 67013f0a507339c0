# dependencies.cmake — the header-only libraries the build needs, found quietly, and one message
# naming every missing one with the packages that provide it, instead of CMake's "Could not find
# a package configuration file provided by fmt".
#   cc1d_require_headers(fmt spdlog [doctest])  sets CC1D_SPDLOG_INCLUDE; defines fmt::fmt-header-only
#                                               and doctest::doctest when asked for.

# name -> Debian package, conda-forge package
set(CC1D_DEP_fmt_DEBIAN libfmt-dev)
set(CC1D_DEP_fmt_CONDA fmt)
set(CC1D_DEP_spdlog_DEBIAN libspdlog-dev)
set(CC1D_DEP_spdlog_CONDA spdlog)
set(CC1D_DEP_doctest_DEBIAN doctest-dev)
set(CC1D_DEP_doctest_CONDA doctest)

function(cc1d_require_headers)
  set(missing "")
  foreach(dep IN LISTS ARGN)
    if(dep STREQUAL "spdlog")
      find_path(CC1D_SPDLOG_INCLUDE spdlog/spdlog.h)
      if(NOT CC1D_SPDLOG_INCLUDE)
        list(APPEND missing spdlog)
      endif()
    else()
      find_package(${dep} QUIET)
      if(NOT ${dep}_FOUND)
        list(APPEND missing ${dep})
      endif()
    endif()
  endforeach()
  if(missing)
    set(debian "")
    set(conda "")
    foreach(dep IN LISTS missing)
      list(APPEND debian ${CC1D_DEP_${dep}_DEBIAN})
      list(APPEND conda ${CC1D_DEP_${dep}_CONDA})
    endforeach()
    string(JOIN " " debian ${debian})
    string(JOIN " " conda ${conda})
    string(JOIN ", " names ${missing})
    message(FATAL_ERROR "causal-conv1d needs the header-only libraries ${names} to build, and they are not "
                        "installed. Install them, then build again: Debian/Ubuntu: apt-get install ${debian}; "
                        "conda: conda install -c conda-forge ${conda}; or run scripts/setup.sh, which does it "
                        "(or point CMAKE_PREFIX_PATH at an installation).")
  endif()
endfunction()
