package vm

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// writeVmlinux decompresses the kernel inside bzImage src into dst, an ELF file
// qemu boots through the kernel's PVH entry point. Under TCG the bzImage's own
// decompressor (xz, for Debian) takes about 4 s of emulated time before the
// kernel prints its first line; the PVH boot skips it.
func writeVmlinux(ctx context.Context, src, dst string) error {
	img, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	payload, err := bzimagePayload(img)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	err = decompressPayload(ctx, payload, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkPVH(dst)
	}
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}

// bzimagePayload returns the compressed kernel inside a bzImage, located by the
// x86 boot protocol header (Documentation/arch/x86/boot.rst): setup_sects at
// 0x1f1, the "HdrS" magic at 0x202, payload_offset and payload_length at 0x248.
func bzimagePayload(img []byte) ([]byte, error) {
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS boot header)")
	}
	setupSects := int(img[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	off := int(binary.LittleEndian.Uint32(img[0x248:]))
	n := int(binary.LittleEndian.Uint32(img[0x24c:]))
	start := (setupSects+1)*512 + off
	if start < 0 || n <= 0 || start+n > len(img) {
		return nil, fmt.Errorf("bzImage payload %d+%d lies outside the %d-byte file", start, n, len(img))
	}
	return img[start : start+n], nil
}

func decompressPayload(ctx context.Context, payload []byte, out io.Writer) error {
	switch {
	case bytes.HasPrefix(payload, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		// The kernel's xz stream uses the x86 BCJ filter, which Go xz libraries
		// lack; xz-utils has it. The kernel build appends the uncompressed size
		// after the stream, hence --single-stream.
		cmd := exec.CommandContext(ctx, "xz", "-dc", "--single-stream")
		cmd.Stdin = bytes.NewReader(payload)
		cmd.Stdout = out
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("xz -d of the kernel payload: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(payload))
		if err != nil {
			return err
		}
		zr.Multistream(false)
		_, err = io.Copy(out, zr)
		return err
	default:
		return fmt.Errorf("kernel payload compressed with a format svclab does not unpack (magic % x)", payload[:min(6, len(payload))])
	}
}

// checkPVH makes sure the ELF file carries the Xen PVH entry note
// (XEN_ELFNOTE_PHYS32_ENTRY, type 18), without which qemu cannot boot it.
func checkPVH(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("decompressed kernel: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			return err
		}
		for len(notes) >= 12 {
			nameSz := int(binary.LittleEndian.Uint32(notes[0:]))
			descSz := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			nameEnd := 12 + align4(nameSz)
			if nameEnd > len(notes) {
				break
			}
			name := string(bytes.TrimRight(notes[12:12+nameSz], "\x00"))
			if name == "Xen" && typ == 18 {
				return nil
			}
			next := nameEnd + align4(descSz)
			if next > len(notes) {
				break
			}
			notes = notes[next:]
		}
	}
	return errors.New("decompressed kernel has no PVH entry note (CONFIG_PVH)")
}

func align4(n int) int { return (n + 3) &^ 3 }
