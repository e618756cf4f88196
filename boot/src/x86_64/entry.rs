//! From QEMU's PVH entry to Rust: the Xen ELF note, 32-bit start, page tables, long mode.
//!
//! QEMU's `-kernel` loads an ELF that carries a `XEN_ELFNOTE_PHYS32_ENTRY` note and jumps to
//! the address in it as the PVH boot protocol says: 32-bit protected mode, flat segments,
//! paging off, interrupts off, EBX = physical address of the `hvm_start_info` block. From
//! there this code
//!
//! 1. zeroes `.bss` (page tables and stack live there),
//! 2. identity-maps the low 4 GiB with 2 MiB pages — RAM, and above 3 GiB the MMIO holes
//!    (the HPET at 0xFED0_0000, the local and I/O APICs) mapped uncached,
//! 3. enables PAE, sets EFER.LME, turns on paging (which activates long mode),
//! 4. loads a GDT with a 64-bit code segment, far-jumps into it, and calls
//!    `kernel_main(start_info)` with a 64 KiB stack.
//!
//! There is no IDT and interrupts stay off: the kernel expects no interrupt and no exception,
//! and should one happen the CPU triple-faults and resets (QEMU's `-no-reboot` then exits, so
//! a fault shows as output that stops early). No SSE set-up is needed either: the
//! `x86_64-unknown-none` target compiles without SSE.

use core::arch::global_asm;

/// Which `hvm_start_info` fields the kernel reads (Xen's `arch-x86/hvm/start_info.h`).
#[repr(C)]
pub struct StartInfo {
    /// `0x336ec578` ("xEn3" with the top bit of the E set).
    pub magic: u32,
    /// Version of the structure: 0 or 1.
    pub version: u32,
    /// SIF_* flags.
    pub flags: u32,
    /// Number of modules.
    pub nr_modules: u32,
    /// Physical address of the module list.
    pub modlist_paddr: u64,
    /// Physical address of the NUL-terminated command line (QEMU's `-append`), or 0.
    pub cmdline_paddr: u64,
    /// Physical address of the ACPI RSDP, or 0.
    pub rsdp_paddr: u64,
}

/// The `hvm_start_info` magic number.
pub const START_INFO_MAGIC: u32 = 0x336e_c578;

global_asm!(
    // The PVH entry note: name "Xen", type 18 (XEN_ELFNOTE_PHYS32_ENTRY), 32-bit address.
    r#"
    .section .note.Xen, "a", @note
    .balign 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .balign 4
    .long pvh_start
    .balign 4
    "#,
    r#"
    .section .text.boot, "ax"
    .code32
    .global pvh_start
pvh_start:
    cld
    mov %ebx, %esi                  # keep the start_info address (EBX) safe in ESI

    # 1. Zero .bss.
    mov $__bss_start, %edi
    mov $__bss_end, %ecx
    sub %edi, %ecx
    xor %eax, %eax
    rep stosb

    # 2. Page tables: PML4[0] -> PDPT; PDPT[0..4] -> four page directories of 2 MiB pages.
    mov $pdpt, %eax
    or $0x3, %eax                   # present, writable
    mov %eax, pml4
    mov $page_dirs, %eax
    or $0x3, %eax
    mov $pdpt, %edi
    mov $4, %ecx
1:  mov %eax, (%edi)
    add $4096, %eax
    add $8, %edi
    loop 1b
    mov $page_dirs, %edi
    xor %ecx, %ecx                  # ECX = index of the 2 MiB page, 0..2048
2:  mov %ecx, %eax
    shl $21, %eax                   # physical address = index * 2 MiB
    or $0x83, %eax                  # present, writable, page size (2 MiB)
    cmp $1536, %ecx                 # from 3 GiB up: device memory
    jb 3f
    or $0x18, %eax                  # page-level cache disable and write-through
3:  mov %eax, (%edi,%ecx,8)
    inc %ecx
    cmp $2048, %ecx
    jne 2b

    # 3. PAE on, page tables in, EFER.LME on, paging on.
    mov %cr4, %eax
    or $(1 << 5), %eax
    mov %eax, %cr4
    mov $pml4, %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx
    rdmsr
    or $(1 << 8), %eax
    wrmsr
    mov %cr0, %eax
    or $((1 << 31) | 1), %eax
    mov %eax, %cr0

    # 4. 64-bit code segment.
    lgdt gdt_pointer
    ljmp $0x08, $long_mode

    .code64
long_mode:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %ax, %ax
    mov %ax, %fs
    mov %ax, %gs
    mov $stack_top, %esp            # zero-extends into RSP (the stack is below 4 GiB)
    mov %esi, %edi                  # first argument: start_info address, zero-extended
    call kernel_main
4:  hlt
    jmp 4b

    .section .rodata.boot, "a"
    .balign 8
gdt:
    .quad 0                         # null descriptor
    .quad 0x00AF9A000000FFFF        # 0x08: 64-bit code, ring 0
    .quad 0x00CF92000000FFFF        # 0x10: data, ring 0
gdt_end:
gdt_pointer:
    .word gdt_end - gdt - 1
    .long gdt

    .section .bss.boot, "aw", @nobits
    .balign 4096
pml4:
    .skip 4096
pdpt:
    .skip 4096
page_dirs:
    .skip 4 * 4096
stack:
    .skip 64 * 1024
stack_top:
    "#,
    options(att_syntax)
);
