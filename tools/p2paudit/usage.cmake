# SPDX-License-Identifier: GPL-2.0-or-later
# The usage text, tools/p2paudit/usage.txt, is the one source of `p2paudit --help` (embedded here
# at configure time, no file is looked up at run time), of the README's usage block (a test
# compares them) and, with tools/p2paudit/manpage.txt, of the man page p2paudit(1).
set(P2PAUDIT_USAGE_TXT ${CMAKE_CURRENT_SOURCE_DIR}/p2paudit/usage.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${P2PAUDIT_USAGE_TXT})
file(READ ${P2PAUDIT_USAGE_TXT} usage_hex HEX)
# As bytes: the text may hold any character a string literal would have to escape.
string(REGEX REPLACE "(..)" "0x\\1," usage_bytes "${usage_hex}")
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/generated/usage_text.h @ONLY CONTENT
"// Generated from tools/p2paudit/usage.txt by tools/p2paudit/usage.cmake: edit usage.txt.
#pragma once
namespace p2paudit::cli {
inline constexpr char kUsageText[] = {@usage_bytes@ 0};
}  // namespace p2paudit::cli
")
target_sources(p2paudit PRIVATE p2paudit/usage.cpp)
target_include_directories(p2paudit PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)

# The man page, written by a build-time tool from the usage text and the page's own sections.
add_executable(make_manpage manpage/make_manpage.cpp)
set(P2PAUDIT_MANPAGE ${CMAKE_CURRENT_BINARY_DIR}/p2paudit.1 CACHE INTERNAL "The generated p2paudit(1)")
add_custom_command(OUTPUT ${P2PAUDIT_MANPAGE}
  COMMAND make_manpage ${P2PAUDIT_USAGE_TXT} ${CMAKE_CURRENT_SOURCE_DIR}/p2paudit/manpage.txt
          ${PROJECT_VERSION} ${P2PAUDIT_MANPAGE}
  DEPENDS make_manpage ${P2PAUDIT_USAGE_TXT} ${CMAKE_CURRENT_SOURCE_DIR}/p2paudit/manpage.txt
  COMMENT "Writing the man page p2paudit.1")
add_custom_target(p2paudit-manpage ALL DEPENDS ${P2PAUDIT_MANPAGE})
include(GNUInstallDirs)
install(FILES ${P2PAUDIT_MANPAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/completions/p2paudit.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME p2paudit)
install(FILES ${PROJECT_SOURCE_DIR}/completions/_p2paudit DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
