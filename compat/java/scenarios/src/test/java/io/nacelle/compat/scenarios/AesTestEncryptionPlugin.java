package io.nacelle.compat.scenarios;

import com.alibaba.nacos.plugin.encryption.spi.EncryptionPluginService;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Base64;
import java.util.HexFormat;
import javax.crypto.Cipher;
import javax.crypto.KeyGenerator;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * The "aes" encryption plugin of the Java client, written here from the documented wire format
 * (shared/docs/nacos-compat.md §7) because nacos-group/nacos-plugin's {@code
 * nacos-aes-encryption-plugin} is not served by Maven Central. The client's own
 * ConfigEncryptionFilter and EncryptionPluginManager (SPI) call it exactly as they would call
 * that plugin: data key = base64(lower-case hex of a random AES key), AES/CBC/PKCS5Padding, IV =
 * the first 16 characters of the hex key as bytes, ciphertext = lower-case hex, key wrapping =
 * identity.
 */
public final class AesTestEncryptionPlugin implements EncryptionPluginService {
  private static final HexFormat HEX = HexFormat.of();

  /** What the client asked this plugin to decrypt: proof the server sent ciphertext and a key. */
  public record Decryption(String secretKey, String ciphertext, String plaintext) {}

  public static final java.util.List<Decryption> DECRYPTIONS = new java.util.concurrent.CopyOnWriteArrayList<>();

  @Override
  public String encrypt(String secretKey, String content) {
    try {
      return HEX.formatHex(cipher(Cipher.ENCRYPT_MODE, secretKey).doFinal(content.getBytes(StandardCharsets.UTF_8)));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String decrypt(String secretKey, String content) {
    if (secretKey == null || secretKey.isEmpty() || content == null) {
      return content; // no data key: not encrypted (e.g. written before encryption)
    }
    try {
      String plain = new String(cipher(Cipher.DECRYPT_MODE, secretKey).doFinal(HEX.parseHex(content)), StandardCharsets.UTF_8);
      DECRYPTIONS.add(new Decryption(secretKey, content, plain));
      return plain;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Cipher cipher(int mode, String secretKey) throws GeneralSecurityException {
    String hexKey = new String(Base64.getDecoder().decode(secretKey), StandardCharsets.UTF_8);
    Cipher c = Cipher.getInstance("AES/CBC/PKCS5Padding");
    c.init(
        mode,
        new SecretKeySpec(HEX.parseHex(hexKey), "AES"),
        new IvParameterSpec(hexKey.substring(0, 16).getBytes(StandardCharsets.UTF_8)));
    return c;
  }

  @Override
  public String generateSecretKey() {
    try {
      KeyGenerator g = KeyGenerator.getInstance("AES");
      g.init(128);
      String hex = HEX.formatHex(g.generateKey().getEncoded());
      return Base64.getEncoder().encodeToString(hex.getBytes(StandardCharsets.UTF_8));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String algorithmName() {
    return "aes";
  }

  @Override
  public String encryptSecretKey(String secretKey) {
    return secretKey;
  }

  @Override
  public String decryptSecretKey(String secretKey) {
    return secretKey;
  }
}
